"""The librdkafka adapter of :class:`~ingest.sink.EventSink`, on confluent-kafka.

Chosen with ``KafkaSinkConfig(client="confluent")`` (or ``TRAJLAKE_KAFKA_CLIENT=confluent``);
it delivers with the same guarantees as :class:`~ingest.kafka_sink.KafkaSink`: ``acks=all``, the
idempotent producer (librdkafka's retries neither duplicate nor reorder), lz4 and batching, and
the same murmur2 partition per key (``partitioner=murmur2_random``, Java's). librdkafka reports a
delivery only from inside ``poll``/``flush``; a thread of this sink polls, so a receipt completes
on its own as kafka-python's future does. Errors are translated into :mod:`ingest.errors`: a
record Kafka refuses for good (too large, an invalid topic) fails with
:class:`~ingest.errors.SinkRejectedError`, anything else with :class:`~ingest.errors.SinkError`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ingest.errors import SinkError, SinkRejectedError, SinkUnavailableError
from ingest.kafka_sink import KafkaSinkConfig, PartitionCounts, probe_servers
from ingest.sink import EventSink, Receipt

log = logging.getLogger(__name__)

_REJECTED = (
    "MSG_SIZE_TOO_LARGE",
    "INVALID_MSG",
    "INVALID_MSG_SIZE",
    "CORRUPT_MESSAGE",
    "TOPIC_EXCEPTION",
    "INVALID_RECORD",
    "RECORD_LIST_TOO_LARGE",
)


class ConfluentReceipt:
    """Receipt of :class:`ConfluentKafkaSink`: completed by librdkafka's delivery report."""

    __slots__ = ("is_done", "exception", "partition", "offset")

    def __init__(self) -> None:
        self.is_done = False
        self.exception: BaseException | None = None
        self.partition: int | None = None
        self.offset: int | None = None

    def __call__(self, err: Any, msg: Any) -> None:
        """The delivery report (called on the poll thread)."""
        if err is None:
            self.partition, self.offset = msg.partition(), msg.offset()
        else:
            self.exception = _translate(err)
        self.is_done = True


def _translate(err: Any) -> SinkError:
    """One of :mod:`ingest.errors` for a librdkafka ``KafkaError``."""
    from confluent_kafka import KafkaError

    rejected = {getattr(KafkaError, n) for n in _REJECTED if hasattr(KafkaError, n)}
    text = f"{err.name()}: {err.str()}"
    if err.code() in rejected:
        return SinkRejectedError(f"Kafka refuses the record for good: {text}")
    return SinkError(f"Kafka delivery failed: {text}")


class ConfluentKafkaSink(EventSink):
    """Delivers records to Kafka through librdkafka, ``acks=all``, idempotent.

    Args:
        config: producer settings (the same as :class:`~ingest.kafka_sink.KafkaSink`'s).
    """

    def __init__(self, config: KafkaSinkConfig | None = None) -> None:
        self.config = config or KafkaSinkConfig()
        self._producer: Any = None
        self._lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._stop = threading.Event()
        self._counts = PartitionCounts()

    def _settings(self) -> dict[str, Any]:
        c = self.config
        return {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": c.compression_type or "none",
            "linger.ms": c.linger_ms,
            "batch.size": c.batch_size,
            "delivery.timeout.ms": c.delivery_timeout_ms,
            "request.timeout.ms": c.request_timeout_ms,
            "message.max.bytes": c.max_request_bytes,
            "partitioner": "murmur2_random",  # Java's default: the partition_of of every key
            "client.id": c.client_id or "trajlake",
            "log_level": 3,  # errors only: a broker that is down is reported by send and probe
        }

    def _get(self) -> Any:
        producer = self._producer
        if producer is not None:
            return producer
        with self._lock:
            if self._producer is None:
                try:
                    from confluent_kafka import KafkaException, Producer
                except ImportError as exc:
                    raise SinkError(
                        "the confluent delivery needs confluent-kafka: pip install 'trajlake[confluent]', or "
                        "set TRAJLAKE_KAFKA_CLIENT=kafka-python"
                    ) from exc
                if not self.probe():
                    raise SinkUnavailableError(f"cannot connect to Kafka at {self.config.bootstrap_servers}")
                try:
                    self._producer = Producer(self._settings())
                except KafkaException as exc:
                    raise SinkError(f"cannot configure the Kafka producer: {exc}") from exc
                self._stop = threading.Event()
                self._poller = threading.Thread(
                    target=_poll_until, args=(self._producer, self._stop), daemon=True, name="rdkafka-poll"
                )
                self._poller.start()
            return self._producer

    def send(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Receipt:
        from confluent_kafka import KafkaException

        producer = self._get()
        receipt = ConfluentReceipt()
        kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": receipt}
        if partition is not None:
            kwargs["partition"] = partition
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while True:
            try:
                producer.produce(topic, **kwargs)
                return receipt
            except BufferError as exc:  # the local queue is full: wait for deliveries, as kafka-python blocks
                if time.monotonic() >= deadline:
                    raise SinkUnavailableError(f"Kafka did not take the record in time: {exc}") from exc
                producer.poll(0.01)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if err is not None and hasattr(err, "code"):
                    raise _translate(err) from exc
                raise SinkError(f"Kafka send failed: {exc}") from exc

    def partition_for(self, topic: str, key: bytes) -> int | None:
        return self._counts.partition_for(topic, key, self._count_partitions)

    def _count_partitions(self, topic: str) -> int:
        try:
            meta = self._get().list_topics(topic, timeout=self.config.max_block_ms / 1000)
        except Exception:  # noqa: BLE001 - (KafkaException, SinkUnavailableError): not known now
            return 0
        found = meta.topics.get(topic)
        return len(found.partitions) if found is not None and found.error is None else 0

    def flush(self, timeout: float | None = None) -> None:
        if self._producer is None:
            return
        left = self._producer.flush(-1 if timeout is None else timeout)
        if left:
            raise SinkError(f"Kafka flush timed out with {left} records undelivered")

    def probe(self) -> bool:
        return probe_servers(self.config.bootstrap_servers)  # a TCP connect: creates nothing

    def _drop(self, producer: Any, poller: threading.Thread | None, stop: threading.Event) -> None:
        try:
            producer.purge(in_queue=True, in_flight=True)  # their receipts fail (_PURGE_*)
            producer.flush(1.0)
        except Exception:  # the producer is being thrown away
            log.debug("purging a Kafka producer failed", exc_info=True)
        stop.set()
        if poller is not None:
            poller.join(5)

    def reset(self) -> None:
        with self._lock:
            old, self._producer = self._producer, None
            poller, stop = self._poller, self._stop
            self._poller = None
        if old is not None:
            threading.Thread(target=self._drop, args=(old, poller, stop), daemon=True).start()

    def close(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
            poller, stop = self._poller, self._stop
            self._poller = None
        if producer is None:
            return
        try:
            producer.flush(5)
        except Exception:  # closing must not raise; the spool keeps the data
            log.warning("error while flushing the Kafka producer", exc_info=True)
        self._drop(producer, poller, stop)


def _poll_until(producer: Any, stop: threading.Event) -> None:
    """Serve delivery reports until ``stop`` (librdkafka calls them only from poll/flush)."""
    while not stop.is_set():
        try:
            producer.poll(0.05)
        except Exception:  # noqa: BLE001 - a report callback must not end the poller
            log.warning("a Kafka delivery report failed", exc_info=True)
