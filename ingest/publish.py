"""Synchronous delivery of a few events (control streams): sent, acknowledged, or an error.

Rollout workers deliver through the spool (:mod:`ingest.delivery`), which keeps
records across broker outages. A learner publishing a checkpoint, or admission
publishing its results, writes a handful of events once and must know at once
whether the log holds them: these go through the same Kafka adapter
(:class:`~ingest.kafka_sink.KafkaSink`, ``acks=all``, idempotent) and return
only when every record is acknowledged.
"""

from __future__ import annotations

from collections.abc import Sequence

from ingest.errors import SinkError, SinkUnavailableError
from ingest.kafka_sink import KafkaSink, KafkaSinkConfig
from schemas import fixes
from schemas.codec import serialize_event
from schemas.events import EventBase

START_BROKER = fixes.START_BROKER


def publish_events(
    bootstrap: str, topic: str, events: Sequence[EventBase], *, timeout_s: float = 30.0
) -> None:
    """Deliver ``events`` to ``topic`` (keyed by their ``episode_id``) and wait for every acknowledgement.

    Raises:
        SinkUnavailableError: the broker cannot be reached (nothing, or not all, was acknowledged).
        SinkError: the broker refused a record.
    """
    if not events:
        return
    sink = KafkaSink(
        KafkaSinkConfig(
            bootstrap_servers=bootstrap,
            max_block_ms=int(timeout_s * 1000),
            request_timeout_ms=int(timeout_s * 1000),
            delivery_timeout_ms=int(timeout_s * 1000) + 1000,
            linger_ms=0,
        )
    )
    where = f"the broker at {bootstrap}"
    try:
        if not sink.probe():
            raise SinkUnavailableError(f"no Kafka broker answers at {bootstrap}", fix=START_BROKER)
        receipts = [sink.send(topic, e.episode_id.encode(), serialize_event(e)) for e in events]
        sink.flush(timeout=timeout_s)
        pending = sum(not r.is_done for r in receipts)
        failed = [r.exception for r in receipts if r.is_done and r.exception is not None]
        if pending:
            raise SinkUnavailableError(
                f"{pending} of {len(events)} events to {topic} were not acknowledged by {where} within "
                f"{timeout_s:g}s",
                fix=START_BROKER,
            )
        if failed:
            raise SinkError(f"{where} refused {len(failed)} of {len(events)} events to {topic}: {failed[0]}")
    finally:
        sink.close()
