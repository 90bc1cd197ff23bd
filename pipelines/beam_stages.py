"""The Beam stages of the log pipeline, one named composite ``PTransform`` each.

``ReadKafkaRanges`` -> ``ParseAndValidate`` (dead letters to quarantine) ->
``DedupEvents`` -> write ``events`` / ``quarantine`` -> ``LoadTouchedEpisodes``
-> ``AssembleEpisodes`` (dead letters to quarantine) -> write ``episodes``,
``steps``, ``rewards``, ``failures``, and ``tasks`` / ``checkpoints`` from the
control streams (:mod:`schemas.control`). Elements travel in batches (one element = many records) where the
per-element overhead would dominate; the writes are single commits per table.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from fold.rows import (
    DERIVED_TABLES,
    EVENT_COLUMNS,
    EventColumns,
    fold_events,
)
from ingest.kafka_sink import MAX_MESSAGE_BYTES
from lake.store import CONFLICT_PREFIX, Lake, OffsetRange, WriteMode
from schemas.codec import parse_event_as_written
from schemas.control import CONTROL_TABLES, control_row, stream_kind
from schemas.errors import SchemaError
from schemas.events import EventBase
from schemas.tables import TABLES

Record = tuple[str, int, int, bytes | None, bytes, int | None]
"""A Kafka record: ``(topic, partition, offset, key, value, timestamp_ms)``."""

QUARANTINE_TAG = "quarantine"

# ------------------------------------------------------------------ read


class Rows(list):  # type: ignore[type-arg]
    """A batch of rows travelling as one element between steps.

    Beam's default coder walks a plain list value by value (a ``datetime`` is pickled on
    its own, twice per ``events`` row); a list subclass is pickled whole, in one C call. The
    stages pass thousands of rows per element, so this is most of the coding cost of a batch.
    """

    __slots__ = ()


READ_CLIENTS = ("auto", "kafka-python", "confluent")
"""The Kafka clients the pipeline reads with (``auto``: see :func:`read_client`)."""


def read_client(name: str = "auto") -> str:
    """The client a read uses: ``name``, or for ``auto`` the one ``TRAJLAKE_KAFKA_CLIENT`` names.

    Where it names none: librdkafka's (``confluent-kafka``) where installed, else kafka-python.

    Raises:
        ValueError: an unknown client, or ``confluent`` without ``confluent-kafka`` installed.
    """
    import os

    if name == "auto":
        name = os.environ.get("TRAJLAKE_KAFKA_CLIENT", "")
        if not name:
            try:
                import confluent_kafka  # noqa: F401
            except ImportError:
                return "kafka-python"
            return "confluent"
    if name not in READ_CLIENTS[1:]:
        raise ValueError(f"unknown Kafka client {name!r}: one of {', '.join(READ_CLIENTS)}")
    if name == "confluent":
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as exc:
            raise ValueError(
                "the confluent Kafka client needs confluent-kafka: pip install 'trajlake[confluent]'"
            ) from exc
    return name


def _transient_codes() -> frozenset[int]:
    try:
        from confluent_kafka import KafkaError
    except ImportError:
        return frozenset()
    return frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
                      KafkaError._RESOLVE, KafkaError._WAIT_COORD})  # fmt: skip


_TRANSIENT = _transient_codes()
"""librdkafka errors it reports through ``consume()`` and recovers from by itself."""


class _ReadRangeFn(beam.DoFn):
    """Reads offset ranges with a Kafka consumer (kafka-python's or librdkafka's); yields batches of records.

    One consumer per worker serves every range it is given: a new consumer per range spent
    tens of milliseconds connecting, each time.
    """

    def __init__(self, bootstrap: str, batch_size: int, client: str = "kafka-python") -> None:
        self.bootstrap = bootstrap
        self.batch_size = batch_size
        self.client = client
        self.records = Metrics.counter("ReadKafkaRanges", "records")
        self._consumers: dict[int, Any] = {}  # by thread: a runner may call one instance from several

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_consumers": {}}  # open consumers stay with their process

    def _open(self) -> Any:
        import threading

        from kafka import KafkaConsumer

        me = threading.get_ident()
        if me not in self._consumers and self.client == "confluent":
            from confluent_kafka import Consumer

            self._consumers[me] = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": "trajlake-range-reader",  # never joined: ranges are assigned
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    # below the log's start: an error that fails the batch, never a jump
                    "auto.offset.reset": "error",
                    "enable.partition.eof": True,
                    "fetch.wait.max.ms": 10,
                    # librdkafka waits this long before fetching again for a partition whose
                    # queue it had filled (default 1 s): a range read from a long log filled it
                    # ahead, and the next unit's first fetch waited out the second
                    "fetch.queue.backoff.ms": 10,
                    # what one fetch asks per partition: a range's worth, not 32 MiB past its end
                    # (a larger record is still fetched whole: the broker returns the first batch
                    # of the fetch's first partition with data whatever its size, and librdkafka
                    # rotates which partition is first, so it comes within a few round trips)
                    "max.partition.fetch.bytes": 4 << 20,
                    "fetch.max.bytes": 64 << 20,
                    "isolation.level": "read_uncommitted",  # what kafka-python reads
                }
            )
        elif me not in self._consumers:
            self._consumers[me] = KafkaConsumer(
                bootstrap_servers=self.bootstrap.split(","),
                enable_auto_commit=False,
                # a range that starts below the log's start (records deleted since the batch was
                # planned) fails the batch: never a jump to the log's end, skipping what is left
                auto_offset_reset="none",
                # a poll before the first fetch is ready sleeps this long (the default 100 ms, twice
                # per range, was a tenth of a 40k-event replay)
                retry_backoff_ms=10,
                max_partition_fetch_bytes=2 * MAX_MESSAGE_BYTES,
                fetch_max_bytes=64 << 20,
                max_poll_records=10000,
            )
        return self._consumers[me]

    def _close(self) -> None:
        import threading

        consumer = self._consumers.pop(threading.get_ident(), None)
        if consumer is not None:
            consumer.close()

    def teardown(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()

    def process(self, unit: OffsetRange | Sequence[OffsetRange]) -> Iterator[list[Record]]:
        """The records of one range, or of a unit of ranges of distinct partitions read together.

        A unit's partitions are assigned at once, so their fetches share round trips (one range
        at a time waited out a fetch per partition: a tenth of a 2,000-event batch over 16).
        Within a partition, records come in offset order.
        """
        from kafka import TopicPartition

        rngs = [r for r in ([unit] if isinstance(unit, OffsetRange) else unit) if r.end > r.start]
        wanted = {TopicPartition(r.topic, r.partition): r for r in rngs}
        if len(wanted) < len(rngs):
            raise ValueError(f"a read unit names a partition twice: {rngs}")
        if not wanted:
            return
        if self.client == "confluent":
            yield from self._read_confluent(rngs)
            return
        consumer = self._open()
        ok = False
        try:
            consumer.assign(list(wanted))
            for tp, r in wanted.items():
                consumer.seek(tp, r.start)
            reading = set(wanted)
            batch: list[Record] = Rows()
            while reading:
                for tp, records in consumer.poll(timeout_ms=1000).items():
                    if tp not in reading:
                        continue
                    end = wanted[tp].end
                    for rec in records:
                        if rec.offset >= end:
                            break
                        batch.append(
                            (rec.topic, rec.partition, rec.offset, rec.key, rec.value, rec.timestamp)
                        )
                        if len(batch) >= self.batch_size:
                            self.records.inc(len(batch))
                            yield batch
                            batch = Rows()
                done = [tp for tp in reading if consumer.position(tp) >= wanted[tp].end]
                if done:
                    reading.difference_update(done)
                    if reading:
                        # Assigned only what is still read (positions kept): records fetched past a
                        # range's end are dropped. Never pause(): kafka-python parks a paused
                        # partition's half-read fetch and, the consumer reused, a later read of that
                        # partition would wait on it for ever.
                        consumer.assign(sorted(reading))
            if batch:
                self.records.inc(len(batch))
                yield batch
            ok = True
        finally:
            if not ok:  # a failed or abandoned read: the next range starts from a new consumer
                self._close()

    def _read_confluent(self, rngs: list[OffsetRange]) -> Iterator[list[Record]]:
        """:meth:`process` on librdkafka: records as they come, each partition until its range's end.

        A partition is done at the first record at or past its end, or at the log's end (a range
        whose last offsets are no records, a transaction marker say); its position is then
        dropped from the assignment so that nothing past the end is fetched for nothing.
        """
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        consumer = self._open()
        ends = {(r.topic, r.partition): r.end for r in rngs}
        nxt = {(r.topic, r.partition): r.start for r in rngs}
        ok = False
        try:
            consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in rngs])
            reading = set(ends)
            batch: list[Record] = Rows()
            while reading:
                done = []
                # consume() waits for all it asks or the timeout: never more than the ranges hold
                left = sum(ends[k] - nxt[k] for k in reading)
                for m in consumer.consume(num_messages=max(1, min(10_000, left)), timeout=0.1):
                    key = (m.topic(), m.partition())
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            if err.fatal() or not (err.retriable() or err.code() in _TRANSIENT):
                                raise KafkaException(err)
                            continue  # a lost connection, brokers down for now: librdkafka retries
                        if key in reading:
                            if m.offset() < ends[key]:
                                raise LookupError(
                                    f"{key[0]}[{key[1]}] ends at offset {m.offset()}, before the "
                                    f"planned range's end {ends[key]} (records lost by the broker?)"
                                )
                            done.append(key)
                        continue
                    if key not in reading:
                        continue
                    off = m.offset()
                    if off < nxt[key]:
                        continue  # (never seen: a fetch from before the assignment; read already)
                    if off >= ends[key]:
                        done.append(key)
                        continue
                    ts_type, ts = m.timestamp()
                    batch.append((key[0], key[1], off, m.key(), m.value(), ts if ts_type else None))
                    nxt[key] = off + 1
                    if off + 1 >= ends[key]:
                        done.append(key)
                    if len(batch) >= self.batch_size:
                        self.records.inc(len(batch))
                        yield batch
                        batch = Rows()
                finished = [k for k in dict.fromkeys(done) if k in reading]
                if finished:
                    reading.difference_update(finished)
                    if reading:
                        # Only the finished partitions leave the assignment: the others keep what
                        # was fetched ahead for them (assigning the rest anew threw that away and
                        # fetched it again, 2.5x the read time of a 100k batch from a 1M log)
                        consumer.incremental_unassign([TopicPartition(t, p) for t, p in finished])
            if batch:
                self.records.inc(len(batch))
                yield batch
            consumer.unassign()  # nothing fetched in the background until the next range
            ok = True
        finally:
            if not ok:  # a failed or abandoned read: the next range starts from a new consumer
                self._close()


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


def read_units(ranges: Iterable[OffsetRange], chunk: int) -> list[tuple[OffsetRange, ...]]:
    """Ranges cut into chunks of at most ``chunk`` offsets, packed into units read together.

    A unit holds at most ``chunk`` offsets, of distinct partitions: a small batch over many
    partitions is one unit (one assignment, shared fetches); a large one is many units of one
    chunk each (units are what the runner spreads over its workers).
    """
    units: list[list[OffsetRange]] = []
    sizes: list[int] = []
    for c in sorted(split_ranges(ranges, chunk), key=len, reverse=True):
        for i, unit in enumerate(units):
            shared = any((u.topic, u.partition) == (c.topic, c.partition) for u in unit)
            if sizes[i] + len(c) <= chunk and not shared:
                unit.append(c)
                sizes[i] += len(c)
                break
        else:
            units.append([c])
            sizes.append(len(c))
    return [tuple(sorted(u, key=lambda r: (r.topic, r.partition, r.start))) for u in units]


class ReadKafkaRanges(beam.PTransform):  # type: ignore[type-arg]
    """A bounded read of explicit offset ranges: ``OffsetRange`` -> batches of records."""

    def __init__(
        self, bootstrap: str, *, batch_size: int = 1000, chunk: int = 50_000, client: str = "auto"
    ) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.batch_size = batch_size
        self.chunk = chunk
        self.client = read_client(client)

    def expand(self, ranges: Any) -> Any:
        return (
            ranges
            | "All" >> beam.Map(lambda r: (0, r))  # (hash(None) differs between processes: Dask)
            | "Together" >> beam.GroupByKey()
            | "Units" >> beam.FlatMapTuple(lambda _, rs: read_units(rs, self.chunk))
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadRangeFn(self.bootstrap, self.batch_size, self.client))
        )


# ------------------------------------------------------------------ parse


def check_stream_topic(event: EventBase, topic: str, control_topics: Mapping[str, str]) -> None:
    """A control stream only on its own topic, and nothing else there.

    Raises:
        SchemaError: the event is on the wrong topic, or a control stream's event is not one of its rows.
    """
    stream = stream_kind(event.episode_id)
    if stream is None:
        if topic in control_topics.values():
            kinds = [k for k, t in control_topics.items() if t == topic]
            raise SchemaError(
                f"topic {topic} carries only {'/'.join(kinds)} control streams, not episode "
                f"{event.episode_id[:120]!r}",
                [("episode_id", "not a control stream of this topic")],
            )
        return
    expected = control_topics.get(stream.kind)
    if expected is not None and topic != expected:
        raise SchemaError(
            f"control stream {event.episode_id[:120]!r} belongs on topic {expected}, not {topic}",
            [("episode_id", "control stream on the wrong topic")],
        )
    control_row(event)


def as_lake(lake: str | Lake) -> Lake:
    """A stage's lake: a :class:`Lake` (an object store's, with its options) or a local root."""
    return lake if isinstance(lake, Lake) else Lake(lake)


class Tagged(dict):  # type: ignore[type-arg]
    """The outputs of a step, by tag (also readable as attributes: ``parsed.events``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


def _only(kv: tuple[str, Any], tag: str) -> tuple[Any, ...]:
    return (kv[1],) if kv[0] == tag else ()


def split_by_tag(pcoll: Any, tags: Iterable[str], label: str) -> Tagged:
    """``(tag, value)`` pairs -> one PCollection of values per tag.

    The one way a stage here has several outputs. Beam's multi-output ``ParDo`` is not used:
    the ``DaskRunner`` keeps one bag per transform, so every tagged output of a ``ParDo``
    would carry every element; one filtering step per tag runs the same on every runner
    (and fuses away on the local ``FnApiRunner``).
    """
    return Tagged(
        {
            tag: pcoll | f"{label}{tag.title().replace('_', '')}" >> beam.FlatMap(_only, tag)
            for tag in tags
        }
    )  # fmt: skip


def gather(pcoll: Any, label: str) -> Any:
    """Every element of ``pcoll`` in one list (one output element; none when ``pcoll`` is empty).

    A ``GroupByKey`` on one key, not ``CombineGlobally`` (``ToList``): its default-value side
    input makes the ``DaskRunner`` recompute the whole upstream graph inside a task.
    """
    return (
        pcoll
        | f"{label}Key" >> beam.Map(lambda x: (0, x))
        | f"{label}Group" >> beam.GroupByKey()
        | f"{label}List" >> beam.MapTuple(lambda _, xs: Rows(xs))
    )


class _ParseFn(beam.DoFn):
    eager_parallel = True  # a pure function of its records (see pipelines.eager_workers)

    def __init__(self, control_topics: Mapping[str, str]) -> None:
        self.control_topics = dict(control_topics)
        self.valid = Metrics.counter("ParseAndValidate", "valid")
        self.invalid = Metrics.counter("ParseAndValidate", "quarantined")

    def process(self, batch: list[Record]) -> Iterator[Any]:
        good = EventColumns()
        bad: list[dict[str, Any]] = Rows()
        for topic, partition, offset, key, value, ts_ms in batch:
            try:
                if value is None:
                    raise SchemaError("empty record (tombstone)", [("<root>", "no value")])
                event, written = parse_event_as_written(value)
                if key is not None and key != event.episode_id.encode("utf-8"):
                    raise SchemaError(
                        f"record key {key[:80]!r} is not the event's episode_id",
                        [("episode_id", "does not match the Kafka key")],
                    )
                check_stream_topic(event, topic, self.control_topics)
                good.add(event, topic, partition, offset, written_version=written)
            except Exception as exc:  # noqa: BLE001 - a poison record is quarantined, never crashes the bundle
                schema = isinstance(exc, SchemaError)
                bad.append(
                    {
                        "topic": topic,
                        "partition": partition,
                        "offset": offset,
                        "key": key,
                        "raw": value,
                        "error": (str(exc) if schema else f"unparseable: {type(exc).__name__}: {exc}")[:4000],
                        "error_fields": exc.fields if isinstance(exc, SchemaError) else ["<root>"],
                        "kafka_ts": (
                            dt.datetime.fromtimestamp(ts_ms / 1000, dt.UTC)
                            if ts_ms is not None and ts_ms >= 0
                            else None
                        ),
                    }
                )
        self.valid.inc(len(good))
        self.invalid.inc(len(bad))
        if len(good):
            yield "events", good.table()
        if bad:
            yield QUARANTINE_TAG, bad


class ParseAndValidate(beam.PTransform):  # type: ignore[type-arg]
    """Batches of records -> batches of ``events`` rows (Arrow tables), and a dead-letter output.

    A record that is not a valid event (bad JSON, schema violation, key not its
    episode id) goes to the ``quarantine`` output with its raw bytes, the error
    and its topic/partition/offset; it never stops the pipeline nor takes its
    valid neighbours with it. A control stream (``checkpoint:...``, ``task:...``) is
    valid only on its topic in ``control_topics`` (kind -> topic), as a row of its
    table; those topics carry nothing else.
    """

    def __init__(self, control_topics: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.control_topics = dict(control_topics or {})

    def expand(self, batches: Any) -> Any:
        parsed = batches | "Parse" >> beam.ParDo(_ParseFn(self.control_topics))
        return split_by_tag(parsed, ("events", QUARANTINE_TAG), "Only")


# ------------------------------------------------------------------ dedup

CONTENT_COLUMNS = ("episode_id", "seq", "type", "ts", "schema_version", "producer", "payload")
"""What makes two copies of an ``event_id`` the same event (where it sits in the log does not)."""


def _log_position(row: dict[str, Any]) -> tuple[str, int, int]:
    return row["topic"], row["partition"], row["offset"]


def same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two ``events`` rows are copies of one event (a re-send), not two events under one id."""
    return all(a[c] == b[c] for c in CONTENT_COLUMNS)


def _envelope(row: dict[str, Any]) -> dict[str, Any]:
    """An ``events`` row as the event it holds (what a conflict's ``quarantine`` row keeps as ``raw``)."""
    return {
        "event_id": row["event_id"], "episode_id": row["episode_id"], "seq": row["seq"],
        "type": row["type"], "ts": row["ts"].isoformat(), "schema_version": row["schema_version"],
        "producer": json.loads(row["producer"]), "payload": json.loads(row["payload"]),
    }  # fmt: skip


def _conflict(
    position: tuple[str, int, int], envelope: dict[str, Any], winner: dict[str, Any]
) -> dict[str, Any]:
    topic, partition, offset = position
    t, p, o = _log_position(winner)
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": str(envelope["episode_id"]).encode("utf-8"),
        "raw": json.dumps(envelope, separators=(",", ":")).encode("utf-8"),
        "error": (
            f"{CONFLICT_PREFIX}{envelope['event_id']} already names another event, at {t}/{p}/{o} "
            f"(episode {winner['episode_id']}, seq {winner['seq']}); this copy at "
            f"{topic}/{partition}/{offset} has different content"
        ),
        "error_fields": ["event_id"],
        "kafka_ts": None,
    }


def conflict_row(loser: dict[str, Any], winner: dict[str, Any]) -> dict[str, Any]:
    """The ``quarantine`` row of an event whose id already names another event."""
    return _conflict(_log_position(loser), _envelope(loser), winner)


class DedupEvents(beam.PTransform):  # type: ignore[type-arg]
    """Batches of rows -> one batch with one row per event (``event_id`` and content).

    Rows (Arrow tables; lists of row dicts are converted) are gathered into one table: the
    lookup against the stored events that follows (:class:`ResolveStoredEvents`) takes the
    whole batch in one step anyway, so spreading the rows over buckets by id first only moved
    them twice (it was 64 buckets of row lists, then of tables: a third of this step's time).
    Copies with the same content are re-sends: the one earliest in the log (topic,
    partition, offset) is kept (:func:`first_copies_of`). Copies of an id with other content
    are all kept here: :class:`ResolveStoredEvents` decides between them and the copy
    already in the ``events`` table, if any.
    """

    def expand(self, batches: Any) -> Any:
        def first_copies(parts: list[pa.Table | list[dict[str, Any]]]) -> pa.Table:
            tables = [events_table(b) for b in parts]
            return first_copies_of(tables[0] if len(tables) == 1 else pa.concat_tables(tables))

        return (
            gather(batches, "Dedup")
            | "FirstCopies" >> beam.Map(first_copies)
            | "NonEmpty" >> beam.Filter(lambda t: t.num_rows > 0)
        )


def events_table(batch: pa.Table | Iterable[dict[str, Any]]) -> pa.Table:
    """A batch of ``events`` rows as an Arrow table in the table's schema (rows as dicts are converted)."""
    schema = TABLES["events"]
    if isinstance(batch, pa.Table):
        return batch if batch.schema.equals(schema) else batch.select(schema.names).cast(schema)
    return pa.Table.from_pylist(list(batch), schema=schema)


def _ids_seen_twice(ids: pa.ChunkedArray | pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    counts = pc.value_counts(ids)
    return counts.field("values").filter(pc.greater(counts.field("counts"), 1))


def first_copies_of(table: pa.Table) -> pa.Table:
    """One row per event of ``table``: copies with the same id and content keep the one earliest in the log.

    Copies of an id with other content are all kept (:class:`ResolveStoredEvents` decides). The
    rows of ids seen once pass as they are, in Arrow; the others are compared as values.
    """
    import pyarrow.compute as pc

    ids = table.column("event_id")
    if table.num_rows < 2 or pc.count_distinct(ids).as_py() == table.num_rows:
        return table
    twice = pc.is_in(ids, value_set=_ids_seen_twice(ids))
    by_content: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in table.filter(twice).to_pylist():
        key = (r["event_id"], *(r[c] for c in CONTENT_COLUMNS))
        if key not in by_content or _log_position(r) < _log_position(by_content[key]):
            by_content[key] = r
    kept = pa.Table.from_pylist(list(by_content.values()), schema=TABLES["events"])
    return pa.concat_tables([table.filter(pc.invert(twice)), kept])


class _ResolveFn(beam.DoFn):
    def __init__(self, lake_root: str | Lake, chunk: int = 5000) -> None:
        self.lake_root = lake_root
        self.chunk = chunk
        self.dups = Metrics.counter("DedupEvents", "already_stored")
        self.conflicts = Metrics.counter("DedupEvents", "conflicts")

    def process(self, batches: list[pa.Table | list[dict[str, Any]]]) -> Iterator[Any]:
        import pyarrow.compute as pc

        parts = [events_table(b) for b in batches]
        batch = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        lake = as_lake(self.lake_root)
        ids = sorted(pc.unique(batch.column("event_id")).to_pylist())
        found = [lake.read_events_by_id(ids[i : i + self.chunk]) for i in range(0, len(ids), self.chunk)]
        stored_rows = [r for t in found for r in t.to_pylist()]  # (none, unless a batch is read again)
        stored: dict[str, dict[str, Any]] = {r["event_id"]: r for r in stored_rows}
        # Only ids stored already or with several copies in the batch need a decision; the others
        # (all of a batch, as a rule) are new events and pass in Arrow.
        slow = pa.concat_arrays(
            [_ids_seen_twice(batch.column("event_id")), pa.array(list(stored), pa.string())]
        )
        copies: dict[str, list[dict[str, Any]]] = {}
        passed = batch
        if len(slow):
            decide = pc.is_in(batch.column("event_id"), value_set=slow)
            passed = batch.filter(pc.invert(decide))
            for r in batch.filter(decide).to_pylist():
                copies.setdefault(r["event_id"], []).append(r)
        fresh, replaced = [], []
        conflicts: dict[tuple[str, int, int], dict[str, Any]] = {}  # by log position: one row each
        swapped: dict[str, dict[str, Any]] = {}
        reread: set[str] = set()
        for eid, rows in copies.items():
            old = stored.get(eid)
            if old is not None:
                # a copy at the stored row's log position is that row read again (a re-run of a
                # batch whose events commit landed): the stored row, not a rival copy of it
                here = _log_position(old)
                again = [r for r in rows if _log_position(r) == here]
                if again:
                    self.dups.inc(len(again))
                    reread.add(eid)
                    rows = [r for r in rows if _log_position(r) != here]
            # the copy earliest in the log names the event, whichever batch it came in (so replay agrees)
            ranked = sorted(rows + ([old] if old is not None else []), key=_log_position)
            winner = ranked[0]
            for other in ranked[1:]:
                if same_content(other, winner):
                    self.dups.inc()
                else:
                    conflicts[_log_position(other)] = conflict_row(other, winner)
            if old is None:
                fresh.append(winner)
            elif winner is not old:
                fresh.append(winner)
                replaced.append((old["event_id"], old["event_date"], old["episode_id"]))
                swapped[eid] = winner
        # Events read again are a re-run's: its episodes are folded again (the killed run may not
        # have committed them), and so are those of copies quarantined against them (a run that
        # swapped a stored copy and was killed left the loser's episode folded with it; only its
        # quarantine row names it now). Copies quarantined against a copy that just lost are
        # judged again against the new winner (a re-send of it is no conflict), so the lake is
        # what replaying the whole log gives.
        refold = {stored[eid]["episode_id"] for eid in reread}
        released = []
        for q in lake.read_conflicts(swapped.keys() | reread):
            envelope = json.loads(q["raw"])
            eid = str(envelope.get("event_id"))
            if eid in reread:
                refold.add(str(envelope.get("episode_id")))
            new = swapped.get(eid)
            if new is None:
                continue
            position = (q["topic"], q["partition"], q["offset"])
            if envelope == _envelope(new):
                released.append(position)
            else:
                conflicts[position] = _conflict(position, envelope, new)
        self.conflicts.inc(len(conflicts))
        decided = pa.Table.from_pylist(fresh, schema=TABLES["events"])
        yield "events", pa.concat_tables([passed, decided]) if fresh else passed
        if refold:
            yield "refold", Rows(sorted(refold))
        if conflicts:
            yield "conflicts", Rows(conflicts.values())
        if replaced:
            yield "replaced", Rows(replaced)
        if released:
            yield "released", Rows(released)


class ResolveStoredEvents(beam.PTransform):  # type: ignore[type-arg]
    """Deduplicated batches -> the rows new to the ``events`` table, conflicts and replaced rows.

    Looks the batch's ids up in ``events`` across every ``event_date``
    partition: a stored copy with the same content makes the new one a
    duplicate (dropped); with other content the copy earliest in the log wins
    (``conflicts`` gets the other as a ``quarantine`` row; when the new copy is
    earlier, ``replaced`` names the stored row it replaces, the conflicts quarantined
    against that row are judged again against the new copy, and ``released`` names
    the ``quarantine`` rows that turn out to be re-sends of it). ``refold`` lists the
    episodes that lost one of the batch's event ids to another copy, now or in a run that
    was killed before it finished: their derived rows are folded again.
    """

    def __init__(self, lake_root: str | Lake) -> None:
        super().__init__()
        self.lake_root = lake_root

    def expand(self, batches: Any) -> Any:
        looked_up = gather(batches, "All") | "Lookup" >> beam.ParDo(_ResolveFn(self.lake_root))
        return split_by_tag(looked_up, ("events", "conflicts", "replaced", "released", "refold"), "Only")


# ------------------------------------------------------------------ assemble


DEAD_LETTER_TAG = "dead_letter"


class AssembleEpisodes(beam.PTransform):  # type: ignore[type-arg]
    """Chunks of ``(episode ids, their events rows in an Arrow table)`` -> derived tables' rows, dead letters.

    The fold is :func:`fold.rows.fold_events`. Every output element is one Arrow table (one
    per chunk of episodes and table), so the writes stage one file per chunk and nothing is
    batched after the fold.

    A stream whose fold raises (an event the parser accepted but the projection
    cannot use) goes to the ``dead_letter`` output as a ``quarantine`` row, and
    its stored rows are left as they were; its neighbours are folded as usual.
    """

    TABLES = DERIVED_TABLES

    def expand(self, grouped: Any) -> Any:
        removed = [f"removed_{t}" for t in CONTROL_TABLES]
        folded = grouped | "Fold" >> beam.ParDo(_FoldFn())
        return split_by_tag(folded, (*self.TABLES, DEAD_LETTER_TAG, "failed", *removed), "Only")


class _FoldFn(beam.DoFn):
    """A chunk of episodes' events -> ``(table or tag, rows)`` pairs (see :class:`AssembleEpisodes`)."""

    eager_parallel = True  # a pure function of its chunk (see pipelines.eager_workers)

    def __init__(self) -> None:
        self.failed = Metrics.counter("AssembleEpisodes", "dead_letters")

    def process(self, chunk: tuple[list[str], pa.Table]) -> Iterator[tuple[str, Any]]:
        done = fold_events(*chunk)
        self.failed.inc(len(done.failed))
        for name, table in done.tables.items():
            yield name, table
        if done.dead_letters:
            yield DEAD_LETTER_TAG, Rows(done.dead_letters)
            yield "failed", Rows(done.failed)
        for name, keys in done.removed.items():
            yield f"removed_{name}", Rows(keys)


EPISODES_PER_FOLD = 500
"""Episodes read and folded together: the unit the fold's work is spread in."""


class _LoadEpisodesFn(beam.DoFn):
    """Episode ids -> chunks of ``(episode ids, every events row of those episodes as an Arrow table)``."""

    def __init__(self, lake_root: str | Lake, chunk: int | None = None) -> None:
        self.lake_root = lake_root
        self.chunk = chunk or EPISODES_PER_FOLD

    def process(self, episode_ids: list[str]) -> Iterator[tuple[list[str], pa.Table]]:
        lake = as_lake(self.lake_root)
        ids = sorted(set(episode_ids))
        for i in range(0, len(ids), self.chunk):
            part = ids[i : i + self.chunk]
            yield part, lake.read_episodes_events(part).select([*EVENT_COLUMNS, "producer"])


class LoadTouchedEpisodes(beam.PTransform):  # type: ignore[type-arg]
    """Touched episode ids -> chunks of ``(episode ids, all their events rows in an Arrow table)``."""

    def __init__(self, lake_root: str | Lake) -> None:
        super().__init__()
        self.lake_root = lake_root

    def expand(self, ids: Any) -> Any:
        return ids | "Load" >> beam.ParDo(_LoadEpisodesFn(self.lake_root)) | "Spread" >> beam.Reshuffle()


# ------------------------------------------------------------------ write


MEMORY_STAGE = "memory://"
"""The prefix of a batch staged in this process's memory (an in-process run) instead of a file."""

_IN_MEMORY: dict[str, pa.Table] = {}
_IN_MEMORY_LOCK = threading.Lock()


def drop_staged_in_memory(stage_id: str) -> None:
    """Forget what a run staged in memory (the driver calls it when the batch is over)."""
    prefix = f"{MEMORY_STAGE}{stage_id}/"
    with _IN_MEMORY_LOCK:
        for key in [k for k in _IN_MEMORY if k.startswith(prefix)]:
            del _IN_MEMORY[key]


class _StageFn(beam.DoFn):
    """A batch of rows -> one Parquet file in the lake's staging area (or, in memory, a table); its path.

    ``in_memory``: the batch runs in this one process (the eager executor), so the table stays in
    memory under a ``memory://`` name instead of a Parquet file written and read back.
    """

    def __init__(self, lake_root: str | Lake, table: str, stage_id: str, in_memory: bool = False) -> None:
        self.lake_root = lake_root
        self.table = table
        self.stage_id = stage_id
        self.in_memory = in_memory

    def process(self, rows: list[dict[str, Any]] | pa.Table) -> Iterator[str]:
        import uuid

        import pyarrow.parquet as pq

        schema = TABLES[self.table]
        if isinstance(rows, pa.Table):  # the fold's output
            table = rows if rows.schema.equals(schema) else rows.select(schema.names).cast(schema)
        else:
            table = pa.Table.from_pylist(rows, schema=schema)
        if not table.num_rows:
            return
        name = f"{self.stage_id}/{self.table}/part-{uuid.uuid4().hex}.parquet"
        if self.in_memory:
            with _IN_MEMORY_LOCK:
                _IN_MEMORY[MEMORY_STAGE + name] = table
            yield MEMORY_STAGE + name
            return
        fs, base = as_lake(self.lake_root).staging()
        path = f"{base}/{name}"
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        pq.write_table(table, path, filesystem=fs)
        yield path


def _staged(path: str, schema: pa.Schema, fs: Any) -> pa.Table:
    import pyarrow.parquet as pq

    if path.startswith(MEMORY_STAGE):
        with _IN_MEMORY_LOCK:
            return _IN_MEMORY[path]
    return pq.read_table(path, schema=schema, filesystem=fs)


class _CommitFn(beam.DoFn):
    """The staged files of a table -> one exactly-once Delta commit."""

    def __init__(
        self,
        lake_root: str | Lake,
        table: str,
        mode: WriteMode,
        txns: dict[str, int],
        skip_empty: bool = False,
    ) -> None:
        self.lake_root = lake_root
        self.table = table
        self.mode = mode
        self.txns = txns
        self.skip_empty = skip_empty
        self.rows = Metrics.counter("WriteDelta", table)

    def process(self, joined: tuple[Any, dict[str, list[Any]]]) -> Iterator[dict[str, Any]]:
        groups = joined[1]
        paths = sorted(p for p in groups["paths"] if p is not None)
        touched = sorted({e for part in groups.get("touched", []) for e in part})
        replaced = sorted({tuple(r) for part in groups.get("replaced", []) for r in part})
        schema = TABLES[self.table]
        lake = as_lake(self.lake_root)
        fs, _ = lake.staging()
        parts = [_staged(p, schema, fs) for p in paths]
        table = pa.concat_tables(parts) if parts else pa.Table.from_pylist([], schema=schema)
        if self.skip_empty and not table.num_rows and not replaced:
            yield {"table": self.table, "rows": 0, "committed": False, "episodes": []}
            return
        events = self.table == "events"
        committed = lake.write(
            self.table, table, mode=self.mode, txns=self.txns, episodes=touched,
            replacing=[(r[0], r[1]) if events else r for r in replaced],
        )  # fmt: skip
        # the staged files stay until the batch is over (the driver removes its run's directory):
        # a runner may run this step again (Dask recomputes a result it lost), and it must find
        # them then; a re-run after the commit landed writes nothing (the ``txn``s say so)
        self.rows.inc(table.num_rows)
        episodes: set[str] = {r[2] for r in replaced} if events else set()
        episodes |= set(touched)
        if "episode_id" in schema.names and table.num_rows:
            episodes |= set(table.column("episode_id").to_pylist())
        yield {
            "table": self.table,
            "rows": table.num_rows,
            "committed": committed,
            "episodes": sorted(episodes),
        }


class WriteDelta(beam.PTransform):  # type: ignore[type-arg]
    """Rows -> one exactly-once commit to a Delta table (with the batch's ``txn``s).

    Batches of rows are staged in parallel as Parquet files under
    ``<lake>/_staging``; one step then commits them all in a single Delta
    transaction carrying the ``txn`` actions (only small file paths travel
    through Beam's shuffle). ``stage_id`` names the run's staging directory (the
    driver removes it when the batch is over). Emits one summary: the table, the rows written,
    whether this run committed (False: a re-run the table already held), and
    the episodes of the rows. With ``touched`` (a PCollection of episode-id
    lists), ``replace_episodes`` empties the rows of those episodes that the
    input no longer has; in any mode, the summary names them too. With ``after``,
    the commit waits for that PCollection (another table's commit summary); with
    ``replaced`` (lists of ``(event_id, event_date, episode_id)`` for ``events``, of
    ``(topic, partition, offset)`` for ``quarantine``), those stored rows are removed in
    the same commit. With ``skip_empty``,
    no rows means no commit at all (a write keyed by its rows, idempotent without
    ``txn``s: the fold's dead letters). With ``in_memory`` (a batch run in one process, by
    the eager executor), the rows are staged in memory, not as Parquet files.
    """

    def __init__(
        self,
        lake_root: str | Lake,
        table: str,
        mode: WriteMode,
        txns: dict[str, int],
        *,
        batched: bool = False,
        touched: Any = None,
        after: Any = None,
        replaced: Any = None,
        buckets: int = 16,
        skip_empty: bool = False,
        stage_id: str | None = None,
        in_memory: bool = False,
    ) -> None:
        super().__init__()
        self.in_memory = in_memory
        self.lake_root = lake_root
        self.table = table
        self.mode = mode
        self.txns = txns
        self.batched = batched
        self.touched = touched
        self.after = after
        self.replaced = replaced
        self.buckets = buckets
        self.skip_empty = skip_empty
        self.stage_id = stage_id

    def expand(self, pcoll: Any) -> Any:
        import hashlib

        stage_id = self.stage_id or hashlib.sha256(repr(sorted(self.txns.items())).encode()).hexdigest()[:16]
        buckets = self.buckets
        batches = (
            pcoll
            if self.batched
            else pcoll  # rows into lists by a hash (BatchElements' last list would be lost on Dask)
            | "Spread"
            >> beam.Map(lambda row: (zlib.crc32(repr(sorted(row.items())).encode()) % buckets, row))
            | "Group" >> beam.GroupByKey()
            | "Lists" >> beam.MapTuple(lambda _, rows: list(rows))
        )
        paths = batches | "Stage" >> beam.ParDo(
            _StageFn(self.lake_root, self.table, stage_id, self.in_memory)
        )
        # one path per element, joined by key; the seed makes the join yield even with no rows at all
        seed = pcoll.pipeline | "Seed" >> beam.Create([(0, None)])
        inputs = {
            "paths": (paths | "KeyPaths" >> beam.Map(lambda x: (0, x)), seed) | "WithSeed" >> beam.Flatten()
        }
        if self.touched is not None:
            inputs["touched"] = self.touched | "KeyTouched" >> beam.Map(lambda x: (0, x))
        if self.after is not None:  # commit only once that commit is done
            inputs["after"] = self.after | "KeyAfter" >> beam.Map(lambda x: (0, x))
        if self.replaced is not None:
            inputs["replaced"] = self.replaced | "KeyReplaced" >> beam.Map(lambda x: (0, x))
        return (
            inputs
            | "Join" >> beam.CoGroupByKey()
            | "Commit"
            >> beam.ParDo(_CommitFn(self.lake_root, self.table, self.mode, self.txns, self.skip_empty))
        )
