"""The Kafka adapter of :class:`~ingest.sink.EventSink`, on kafka-python.

Configured for loss-free, ordered, high-throughput delivery: ``acks=all``, the
idempotent producer (so the producer's own retries neither duplicate nor
reorder), lz4 compression, and batching (``linger_ms``, ``batch_size``). Keys
are episode ids; since every event of an episode carries the same key, the
partition is computed once per episode with the same murmur2 mapping the Java
and Python default partitioners use, and passed explicitly.

The producer is created lazily, so a sink can be built while the broker is
down; kafka-python errors are translated into :mod:`ingest.errors`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaProducer
from kafka import errors as kafka_errors
from kafka.partitioner.default import murmur2

from ingest.errors import SinkError, SinkRejectedError, SinkUnavailableError
from ingest.sink import EventSink, Receipt
from ingest.spool import MAX_VALUE_BYTES

log = logging.getLogger(__name__)


MAX_MESSAGE_BYTES = MAX_VALUE_BYTES + (1 << 20)
"""Largest Kafka message (record plus batch framing) producers send and the broker accepts."""
METADATA_RETRY_S = 5.0
"""After a failed metadata lookup, partitions are not asked for again for this long."""


def is_rejection(exc: BaseException) -> bool:
    """Whether Kafka refused a record for good (retrying the same bytes cannot succeed)."""
    permanent = tuple(
        getattr(kafka_errors, name)
        for name in ("MessageSizeTooLargeError", "RecordTooLargeError", "InvalidTopicError",
                     "RecordListTooLargeError", "InvalidRecordError", "CorruptRecordError")
        if hasattr(kafka_errors, name)
    )  # fmt: skip
    return isinstance(exc, (SinkRejectedError, *permanent))


def partition_of(key: bytes, num_partitions: int) -> int:
    """Kafka's default (murmur2) partition of ``key``."""
    return int(murmur2(key) & 0x7FFFFFFF) % num_partitions


@dataclass(frozen=True)
class KafkaSinkConfig:
    """Producer settings of the Kafka sink."""

    bootstrap_servers: str = "127.0.0.1:9092"
    """Comma-separated ``host:port`` list."""
    linger_ms: int = 5
    """How long the producer waits to fill a batch."""
    batch_size: int = 256 * 1024
    """Maximum bytes per partition batch."""
    compression_type: str | None = "lz4"
    """Batch compression (``lz4``, ``gzip``, ``zstd`` or ``None``)."""
    delivery_timeout_ms: int = 120_000
    """Upper bound on reporting success or failure of a record."""
    request_timeout_ms: int = 30_000
    """Per request timeout."""
    max_block_ms: int = 10_000
    """How long ``send`` may block for metadata or buffer space."""
    client_id: str | None = None
    """Client id reported to the broker."""
    api_version: tuple[int, ...] | None = None
    """Pin the protocol version instead of probing (``None`` probes)."""
    max_request_bytes: int = MAX_MESSAGE_BYTES
    """Largest request the producer sends: fits the largest record the spool takes."""
    client: str = field(default_factory=lambda: os.environ.get("TRAJLAKE_KAFKA_CLIENT", "kafka-python"))
    """The producer library: ``kafka-python`` or ``confluent`` (librdkafka, :mod:`ingest.confluent_sink`);
    the default comes from ``TRAJLAKE_KAFKA_CLIENT``."""

    def __post_init__(self) -> None:
        if self.client not in ("kafka-python", "confluent"):
            raise SinkError(
                f"unknown Kafka client {self.client!r} (TRAJLAKE_KAFKA_CLIENT or client=): "
                "use 'kafka-python' or 'confluent'"
            )


def probe_servers(bootstrap_servers: str) -> bool:
    """Whether any of the comma-separated ``host:port`` servers takes a TCP connection (cheap)."""
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0):
                return True
        except (OSError, ValueError):
            continue
    return False


class PartitionCounts:
    """How many partitions each topic has, asked of Kafka once per topic (both sinks keep one).

    A lookup that finds nothing is not repeated for :data:`METADATA_RETRY_S`: callers get ``None``
    meanwhile instead of each blocking on Kafka. ``lookups`` counts the questions asked.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}
        self.lookups = 0

    def partition_for(self, topic: str, key: bytes, ask: Callable[[str], int]) -> int | None:
        """``key``'s partition of ``topic``; ``ask(topic)`` counts its partitions (0: not known now)."""
        n = self._counts.get(topic)
        if n is None:
            if time.monotonic() < self._retry_at.get(topic, 0.0):
                return None  # asked recently and Kafka did not say: do not block every caller on it
            self.lookups += 1
            n = ask(topic)
            if not n:
                self._retry_at[topic] = time.monotonic() + METADATA_RETRY_S
                return None
            self._counts[topic] = n
        return partition_of(key, n)


class KafkaSink(EventSink):
    """Delivers records to Kafka with ``acks=all`` and the idempotent producer.

    Args:
        config: producer settings.
    """

    def __init__(self, config: KafkaSinkConfig | None = None) -> None:
        self.config = config or KafkaSinkConfig()
        self._producer: KafkaProducer | None = None
        self._lock = threading.Lock()
        self._counts = PartitionCounts()

    @property
    def metadata_lookups(self) -> int:
        """Partition lookups that asked Kafka (each may wait up to ``max_block_ms``)."""
        return self._counts.lookups

    def _kwargs(self) -> dict[str, Any]:
        c = self.config
        kw: dict[str, Any] = dict(
            bootstrap_servers=c.bootstrap_servers.split(","),
            acks="all",
            enable_idempotence=True,
            compression_type=c.compression_type,
            linger_ms=c.linger_ms,
            batch_size=c.batch_size,
            delivery_timeout_ms=c.delivery_timeout_ms,
            request_timeout_ms=c.request_timeout_ms,
            max_block_ms=c.max_block_ms,
            max_in_flight_requests_per_connection=5,
            client_id=c.client_id or f"trajlake-{socket.gethostname()}",
            max_request_size=c.max_request_bytes,
            bootstrap_timeout_ms=min(c.max_block_ms, 10_000),
            metrics_enabled=False,
        )
        if c.api_version is not None:
            kw["api_version"] = c.api_version
        return kw

    def _get(self) -> KafkaProducer:
        producer = self._producer
        if producer is not None:
            return producer
        with self._lock:
            if self._producer is None:
                try:
                    self._producer = KafkaProducer(**self._kwargs())
                except kafka_errors.KafkaError as exc:
                    raise SinkUnavailableError(
                        f"cannot connect to Kafka at {self.config.bootstrap_servers}: {exc}"
                    ) from exc
            return self._producer

    def send(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Receipt:
        producer = self._get()
        try:
            future: Receipt = producer.send(topic, value=value, key=key, partition=partition)
        except kafka_errors.KafkaTimeoutError as exc:
            raise SinkUnavailableError(f"Kafka did not take the record in time: {exc}") from exc
        except kafka_errors.IllegalStateError as exc:
            raise SinkUnavailableError(f"Kafka producer closed: {exc}") from exc
        except kafka_errors.KafkaError as exc:
            if is_rejection(exc):
                raise SinkRejectedError(f"Kafka refuses the record for good: {exc}") from exc
            raise SinkError(f"Kafka send failed: {exc}") from exc
        return future

    def partition_for(self, topic: str, key: bytes) -> int | None:
        return self._counts.partition_for(topic, key, self._count_partitions)

    def _count_partitions(self, topic: str) -> int:
        try:
            return len(self._get().partitions_for(topic) or ())
        except (kafka_errors.KafkaError, SinkUnavailableError):
            return 0

    def flush(self, timeout: float | None = None) -> None:
        if self._producer is None:
            return
        try:
            self._producer.flush(timeout=timeout)
        except kafka_errors.KafkaError as exc:
            raise SinkError(f"Kafka flush failed: {exc}") from exc

    def probe(self) -> bool:
        return probe_servers(self.config.bootstrap_servers)  # a TCP connect: creates nothing

    def reset(self) -> None:
        with self._lock:
            old, self._producer = self._producer, None
        if old is not None:
            # A forced close fails what the old producer still holds; do it off
            # the caller's thread, a wedged client may take its time.
            threading.Thread(target=_force_close, args=(old,), daemon=True).start()

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                try:
                    self._producer.close(timeout=5)
                except Exception:  # closing must not raise; the spool keeps the data
                    log.warning("error while closing the Kafka producer", exc_info=True)
                self._producer = None


def _force_close(producer: KafkaProducer) -> None:
    """Throw away a producer whose in-flight records will never complete.

    ``close(timeout=0)`` first flushes, which raises while batches are pending,
    so it never reaches the sender's force close; do what ``close`` would do last
    (kafka-python's own ``_sender.force_close``) and mark the producer closed so
    its finaliser does not try again.
    """
    try:
        producer.close(timeout=0)
        return
    except Exception:  # the producer is being thrown away
        log.debug("graceful close of a stalled Kafka producer failed", exc_info=True)
    sender = getattr(producer, "_sender", None)
    if sender is not None:
        try:
            sender.force_close()
        except Exception:
            log.debug("force close of a stalled Kafka producer failed", exc_info=True)
    producer._closed = True


def make_sink(config: KafkaSinkConfig) -> EventSink:
    """The sink ``config.client`` names: ``kafka-python`` (the default) or ``confluent`` (librdkafka)."""
    if config.client == "confluent":
        from ingest.confluent_sink import ConfluentKafkaSink

        return ConfluentKafkaSink(config)
    return KafkaSink(config)
