"""Bounded reads of the log: every record of a topic up to its current end offsets."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kafka import KafkaConsumer, TopicPartition
from kafka import errors as kafka_errors

from ingest.errors import SinkUnavailableError
from ingest.kafka_sink import MAX_MESSAGE_BYTES
from schemas import fixes
from schemas.codec import parse_event
from schemas.errors import SchemaError
from schemas.events import Event


@dataclass(frozen=True)
class LogRecord:
    """One record of the log, parsed when it is a valid event."""

    topic: str
    """Topic it was read from."""
    partition: int
    """Partition."""
    offset: int
    """Offset within the partition."""
    key: bytes | None
    """Record key (the episode id)."""
    value: bytes
    """Raw record bytes."""
    event: Event | None
    """The parsed event, or ``None`` when it failed validation."""
    error: str | None
    """Why it failed validation."""


def read_log(
    bootstrap: str,
    topic: str,
    *,
    start: dict[int, int] | None = None,
    end: dict[int, int] | None = None,
    poll_timeout_ms: int = 1000,
    missing_ok: bool = True,
) -> Iterator[tuple[str, int, int, bytes | None, bytes]]:
    """Yield ``(topic, partition, offset, key, value)`` of ``[start, end)`` per partition.

    Args:
        bootstrap: Kafka bootstrap servers.
        topic: the topic to read.
        start: first offset per partition (default: the beginning).
        end: end offset (exclusive) per partition (default: the end offsets now).
        poll_timeout_ms: how long one poll waits for records.
        missing_ok: a topic that does not exist reads as empty (else it raises).

    Raises:
        SinkUnavailableError: Kafka cannot be reached, or the topic does not exist and not ``missing_ok``.
    """
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap.split(","),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=2 * MAX_MESSAGE_BYTES,
            fetch_max_bytes=64 << 20,
            request_timeout_ms=30000,
        )
    except kafka_errors.KafkaError as exc:
        raise SinkUnavailableError(f"cannot connect to Kafka at {bootstrap}: {exc}") from exc
    try:
        parts = sorted(consumer.partitions_for_topic(topic) or [])
        tps = [TopicPartition(topic, p) for p in parts]
        if not tps:
            if not missing_ok:
                raise SinkUnavailableError(
                    f"there is no topic {topic} on the broker at {bootstrap}", fix=fixes.TOPIC_MISSING
                )
            return
        ends = end if end is not None else {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
        begins = start or {tp.partition: o for tp, o in consumer.beginning_offsets(tps).items()}
        todo = [tp for tp in tps if begins.get(tp.partition, 0) < ends.get(tp.partition, 0)]
        if not todo:
            return
        consumer.assign(todo)
        for tp in todo:
            consumer.seek(tp, begins.get(tp.partition, 0))
        remaining = set(todo)
        while remaining:
            batch = consumer.poll(timeout_ms=poll_timeout_ms)
            for tp, records in batch.items():
                stop = ends[tp.partition]
                for r in records:
                    if r.offset < stop:
                        yield r.topic, r.partition, r.offset, r.key, r.value
            for tp in list(remaining):
                if consumer.position(tp) >= ends[tp.partition]:
                    remaining.discard(tp)
    finally:
        consumer.close()


def read_events(
    bootstrap: str, topic: str, *, episode_id: str | None = None, missing_ok: bool = True
) -> Iterator[LogRecord]:
    """Every record of ``topic`` up to now, parsed; optionally of one episode only.

    Raises:
        SinkUnavailableError: as :func:`read_log`.
    """
    key = episode_id.encode() if episode_id else None
    for t, p, o, k, v in read_log(bootstrap, topic, missing_ok=missing_ok):
        if key is not None and k != key:
            continue
        try:
            event: Event | None = parse_event(v)
            error = None
        except SchemaError as exc:
            event, error = None, str(exc)
        yield LogRecord(t, p, o, k, v, event, error)
