"""The Beam stages of the log pipeline, one named composite ``PTransform`` each.

``ReadKafkaRanges`` -> ``ParseAndValidate`` (dead letters to quarantine) ->
``DedupEvents`` -> write ``events`` / ``quarantine`` -> ``LoadTouchedEpisodes``
-> ``AssembleEpisodes`` -> write ``episodes``, ``steps``, ``rewards``,
``failures``. Elements travel in batches (one element = many records) where the
per-element overhead would dominate; the writes are single commits per table.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from pipelines.delta_sink import Lake, OffsetRange, WriteMode
from pipelines.failures import failure_rows
from pipelines.projection import episode_row, fold_episode, reward_rows, step_rows
from schemas.codec import parse_event
from schemas.errors import SchemaError
from schemas.events import EventBase
from schemas.tables import TABLES

Record = tuple[str, int, int, bytes | None, bytes, int | None]
"""A Kafka record: ``(topic, partition, offset, key, value, timestamp_ms)``."""

QUARANTINE_TAG = "quarantine"

# ------------------------------------------------------------------ read


class _ReadRangeFn(beam.DoFn):
    """Reads one offset range with a Python Kafka consumer; yields batches of records."""

    def __init__(self, bootstrap: str, batch_size: int) -> None:
        self.bootstrap = bootstrap
        self.batch_size = batch_size
        self.records = Metrics.counter("ReadKafkaRanges", "records")

    def process(self, rng: OffsetRange) -> Iterator[list[Record]]:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap.split(","),
            enable_auto_commit=False,
            max_partition_fetch_bytes=16 << 20,
            fetch_max_bytes=64 << 20,
            max_poll_records=10000,
        )
        try:
            tp = TopicPartition(rng.topic, rng.partition)
            consumer.assign([tp])
            consumer.seek(tp, rng.start)
            batch: list[Record] = []
            while consumer.position(tp) < rng.end:
                for records in consumer.poll(timeout_ms=1000).values():
                    for r in records:
                        if r.offset >= rng.end:
                            break
                        batch.append((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp))
                        if len(batch) >= self.batch_size:
                            self.records.inc(len(batch))
                            yield batch
                            batch = []
            if batch:
                self.records.inc(len(batch))
                yield batch
        finally:
            consumer.close()


def split_ranges(ranges: Iterable[OffsetRange], chunk: int) -> list[OffsetRange]:
    """Cut ranges into chunks of at most ``chunk`` offsets (units of parallel reading)."""
    out = []
    for r in ranges:
        s = r.start
        while s < r.end:
            e = min(r.end, s + chunk)
            out.append(OffsetRange(r.topic, r.partition, s, e))
            s = e
    return out


class ReadKafkaRanges(beam.PTransform):  # type: ignore[type-arg]
    """A bounded read of explicit offset ranges: ``OffsetRange`` -> batches of records."""

    def __init__(self, bootstrap: str, *, batch_size: int = 1000, chunk: int = 50_000) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.batch_size = batch_size
        self.chunk = chunk

    def expand(self, ranges: Any) -> Any:
        return (
            ranges
            | "Split" >> beam.FlatMap(lambda r: split_ranges([r], self.chunk))
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadRangeFn(self.bootstrap, self.batch_size))
        )


# ------------------------------------------------------------------ parse


def event_row(
    event: EventBase,
    topic: str,
    partition: int,
    offset: int,
    raw: dict[str, Any] | None = None,
    written_version: int | None = None,
) -> dict[str, Any]:
    """The ``events`` row of a parsed event."""
    ts: dt.datetime = event.ts
    return {
        "event_id": event.event_id,
        "episode_id": event.episode_id,
        "seq": event.seq,
        "type": event.type,
        "ts": ts,
        "event_date": ts.date(),
        "schema_version": written_version if written_version is not None else event.schema_version,
        "producer": event.producer.model_dump_json(),
        "payload": event.payload.model_dump_json(),
        "topic": topic,
        "partition": partition,
        "offset": offset,
    }


def row_to_event(row: dict[str, Any]) -> EventBase:
    """Rebuild the (upcast) event of an ``events`` row."""
    ts = row["ts"]
    return parse_event(
        {
            "event_id": row["event_id"],
            "episode_id": row["episode_id"],
            "seq": row["seq"],
            "type": row["type"],
            "ts": ts.isoformat() if isinstance(ts, dt.datetime) else ts,
            "producer": json.loads(row["producer"]),
            "payload": json.loads(row["payload"]),
        }
    )


def _written_version(value: bytes) -> int | None:
    # The version as written (before upcasting), for the record; cheap scan.
    i = value.find(b'"schema_version":')
    if i < 0:
        return None
    j = i + len(b'"schema_version":')
    digits = bytearray()
    while j < len(value) and value[j : j + 1] in (b" ",):
        j += 1
    while j < len(value) and 48 <= value[j] <= 57:
        digits.append(value[j])
        j += 1
    return int(digits) if digits else None


class _ParseFn(beam.DoFn):
    def __init__(self) -> None:
        self.valid = Metrics.counter("ParseAndValidate", "valid")
        self.invalid = Metrics.counter("ParseAndValidate", "quarantined")

    def process(self, batch: list[Record]) -> Iterator[Any]:
        good: list[dict[str, Any]] = []
        bad: list[dict[str, Any]] = []
        for topic, partition, offset, key, value, ts_ms in batch:
            try:
                if value is None:
                    raise SchemaError("empty record (tombstone)", [("<root>", "no value")])
                event = parse_event(value)
                if key is not None and key != event.episode_id.encode("utf-8"):
                    raise SchemaError(
                        f"record key {key[:80]!r} is not the event's episode_id",
                        [("episode_id", "does not match the Kafka key")],
                    )
                good.append(
                    event_row(event, topic, partition, offset, written_version=_written_version(value))
                )
            except SchemaError as exc:
                bad.append(
                    {
                        "topic": topic,
                        "partition": partition,
                        "offset": offset,
                        "key": key,
                        "raw": value,
                        "error": str(exc)[:4000],
                        "error_fields": exc.fields,
                        "kafka_ts": (
                            dt.datetime.fromtimestamp(ts_ms / 1000, dt.UTC)
                            if ts_ms is not None and ts_ms >= 0
                            else None
                        ),
                    }
                )
        self.valid.inc(len(good))
        self.invalid.inc(len(bad))
        if good:
            yield good
        if bad:
            yield pvalue.TaggedOutput(QUARANTINE_TAG, bad)


class ParseAndValidate(beam.PTransform):  # type: ignore[type-arg]
    """Batches of records -> batches of ``events`` rows, and a dead-letter output.

    A record that is not a valid event (bad JSON, schema violation, key not its
    episode id) goes to the ``quarantine`` output with its raw bytes, the error
    and its topic/partition/offset; it never stops the pipeline nor takes its
    valid neighbours with it.
    """

    def expand(self, batches: Any) -> Any:
        return batches | "Parse" >> beam.ParDo(_ParseFn()).with_outputs(QUARANTINE_TAG, main="events")


# ------------------------------------------------------------------ dedup


def _first_seen(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return min(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


class DedupEvents(beam.PTransform):  # type: ignore[type-arg]
    """Batches of rows -> batches with one row per ``event_id`` (the earliest in the log).

    Rows are spread over ``buckets`` by a hash of their ``event_id`` and grouped
    per bucket in small lists, so the shuffle moves a few thousand elements
    rather than one per event, and every copy of an event meets the others in
    its bucket. Duplicates against rows already in the ``events`` table are
    removed by the table write itself (insert only when the key is absent).
    """

    def __init__(self, buckets: int = 64) -> None:
        super().__init__()
        self.buckets = buckets

    def expand(self, batches: Any) -> Any:
        buckets = self.buckets

        def spread(batch: list[dict[str, Any]]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
            parts: dict[int, list[dict[str, Any]]] = {}
            for r in batch:
                parts.setdefault(zlib.crc32(r["event_id"].encode()) % buckets, []).append(r)
            yield from parts.items()

        def first_copies(kv: tuple[int, Iterable[list[dict[str, Any]]]]) -> list[dict[str, Any]]:
            by_id: dict[str, list[dict[str, Any]]] = {}
            for part in kv[1]:
                for r in part:
                    by_id.setdefault(r["event_id"], []).append(r)
            return [_first_seen(copies) for copies in by_id.values()]

        return (
            batches
            | "SpreadByEventId" >> beam.FlatMap(spread)
            | "Group" >> beam.GroupByKey()
            | "FirstCopies" >> beam.Map(first_copies)
            | "NonEmpty" >> beam.Filter(bool)
        )


# ------------------------------------------------------------------ assemble


def assemble(episode_id: str, rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows of the four derived tables for one episode, from its ``events`` rows."""
    state = fold_episode(episode_id, (row_to_event(r) for r in rows))
    return {
        "episodes": [episode_row(state)],
        "steps": step_rows(state),
        "rewards": reward_rows(state),
        "failures": failure_rows(state),
    }


class AssembleEpisodes(beam.PTransform):  # type: ignore[type-arg]
    """``(episode_id, [events rows])`` -> tagged rows of episodes/steps/rewards/failures."""

    TABLES = ("episodes", "steps", "rewards", "failures")

    def expand(self, grouped: Any) -> Any:
        def emit(kv: tuple[str, list[dict[str, Any]]]) -> Iterator[Any]:
            out = assemble(kv[0], kv[1])
            for name in self.TABLES:
                for row in out[name]:
                    yield pvalue.TaggedOutput(name, row)

        return grouped | "Fold" >> beam.FlatMap(emit).with_outputs(*self.TABLES)


class _LoadEpisodesFn(beam.DoFn):
    """Episode ids -> ``(episode_id, rows)`` with every event of the episode in ``events``."""

    def __init__(self, lake_root: str, chunk: int = 500) -> None:
        self.lake_root = lake_root
        self.chunk = chunk

    def process(self, episode_ids: list[str]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        lake = Lake(self.lake_root)
        ids = sorted(set(episode_ids))
        for i in range(0, len(ids), self.chunk):
            part = ids[i : i + self.chunk]
            table = lake.read_episodes_events(part)
            grouped: dict[str, list[dict[str, Any]]] = {e: [] for e in part}
            for row in table.to_pylist():
                grouped[row["episode_id"]].append(row)
            yield from grouped.items()


class LoadTouchedEpisodes(beam.PTransform):  # type: ignore[type-arg]
    """A list of touched episode ids -> ``(episode_id, all its events rows)``."""

    def __init__(self, lake_root: str) -> None:
        super().__init__()
        self.lake_root = lake_root

    def expand(self, ids: Any) -> Any:
        return ids | "Load" >> beam.ParDo(_LoadEpisodesFn(self.lake_root)) | "Spread" >> beam.Reshuffle()


# ------------------------------------------------------------------ write


class _StageFn(beam.DoFn):
    """A batch of rows -> one Parquet file in the lake's staging area; yields its path."""

    def __init__(self, lake_root: str, table: str, stage_id: str) -> None:
        self.lake_root = lake_root
        self.table = table
        self.stage_id = stage_id

    def process(self, rows: list[dict[str, Any]]) -> Iterator[str]:
        import uuid

        import pyarrow.parquet as pq

        if not rows:
            return
        directory = Path(self.lake_root) / "_staging" / self.stage_id / self.table
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"part-{uuid.uuid4().hex}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=TABLES[self.table]), path)
        yield str(path)


class _CommitFn(beam.DoFn):
    """The staged files of a table -> one exactly-once Delta commit."""

    def __init__(self, lake_root: str, table: str, mode: WriteMode, txns: dict[str, int]) -> None:
        self.lake_root = lake_root
        self.table = table
        self.mode = mode
        self.txns = txns
        self.rows = Metrics.counter("WriteDelta", table)

    def process(self, joined: tuple[Any, dict[str, list[Any]]]) -> Iterator[dict[str, Any]]:
        import pyarrow.parquet as pq

        groups = joined[1]
        paths = sorted(p for part in groups["paths"] for p in part)
        touched = sorted({e for part in groups.get("touched", []) for e in part})
        schema = TABLES[self.table]
        parts = [pq.read_table(p, schema=schema) for p in paths]
        table = pa.concat_tables(parts) if parts else pa.Table.from_pylist([], schema=schema)
        lake = Lake(self.lake_root)
        committed = lake.write(self.table, table, mode=self.mode, txns=self.txns, episodes=touched)
        for p in paths:
            Path(p).unlink(missing_ok=True)
        self.rows.inc(table.num_rows)
        episodes: list[str] = []
        if "episode_id" in schema.names and table.num_rows:
            episodes = sorted(set(table.column("episode_id").to_pylist()))
        yield {"table": self.table, "rows": table.num_rows, "committed": committed, "episodes": episodes}


class WriteDelta(beam.PTransform):  # type: ignore[type-arg]
    """Rows -> one exactly-once commit to a Delta table (with the batch's ``txn``s).

    Batches of rows are staged in parallel as Parquet files under
    ``<lake>/_staging``; one step then commits them all in a single Delta
    transaction carrying the ``txn`` actions (only small file paths travel
    through Beam's shuffle). Emits one summary: the table, the rows written,
    whether this run committed (False: a re-run the table already held), and
    the episodes of the rows. With ``touched`` (a PCollection of episode-id
    lists), ``replace_episodes`` empties the rows of those episodes that the
    input no longer has.
    """

    def __init__(
        self,
        lake_root: str,
        table: str,
        mode: WriteMode,
        txns: dict[str, int],
        *,
        batched: bool = False,
        touched: Any = None,
        batch_size: int = 2000,
    ) -> None:
        super().__init__()
        self.lake_root = lake_root
        self.table = table
        self.mode = mode
        self.txns = txns
        self.batched = batched
        self.touched = touched
        self.batch_size = batch_size

    def expand(self, pcoll: Any) -> Any:
        import hashlib

        stage_id = hashlib.sha256(repr(sorted(self.txns.items())).encode()).hexdigest()[:16]
        batches = (
            pcoll
            if self.batched
            else pcoll
            | "Batch" >> beam.BatchElements(min_batch_size=self.batch_size, max_batch_size=self.batch_size)
        )
        paths = batches | "Stage" >> beam.ParDo(_StageFn(self.lake_root, self.table, stage_id))
        inputs = {
            "paths": paths | "Collect" >> beam.combiners.ToList() | "KeyPaths" >> beam.Map(lambda x: (0, x))
        }
        if self.touched is not None:
            inputs["touched"] = self.touched | "KeyTouched" >> beam.Map(lambda x: (0, x))
        return (
            inputs
            | "Join" >> beam.CoGroupByKey()
            | "Commit" >> beam.ParDo(_CommitFn(self.lake_root, self.table, self.mode, self.txns))
        )
