"""Rows of the lake from events and back, and the fold of whole ``events`` tables into the derived ones.

:func:`event_row` is the ``events`` row of a parsed event; :func:`row_to_event` the event of a
row (a full parse: for the consumers that need the typed model, the judges). The fold itself
never builds a model per event: :func:`fold_events` takes the ``events`` rows of many streams
as one Arrow table, reads it column by column, decodes each payload once
(:mod:`fold.views`) and returns every derived table as an Arrow table, one row group per
call. :func:`assemble` is the same fold for one stream's rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from fold.failures import failure_rows
from fold.projection import episode_row, fold_episode, reward_rows, step_rows
from fold.samples import sample_rows
from fold.views import EventView, decode_payload
from schemas.codec import parse_event
from schemas.control import CONTROL_TABLES, control_row, stream_key, stream_kind
from schemas.events import EventBase
from schemas.tables import TABLES

EPISODE_TABLES = ("episodes", "steps", "rewards", "failures", "samples")
"""The tables folded from episodes."""
DERIVED_TABLES = (*EPISODE_TABLES, *CONTROL_TABLES)
"""Every table the fold emits rows of."""
FOLD_ERROR = "fold failed: "
"""How the error of a stream the fold could not assemble starts (its ``quarantine`` row)."""
EVENT_COLUMNS = ("event_id", "episode_id", "seq", "type", "ts", "payload", "topic", "partition", "offset")
"""The ``events`` columns the fold reads (``producer`` too, for the control streams' rows)."""


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _utc_micros(field: pa.Field) -> bool:
    t = field.type
    return pa.types.is_timestamp(t) and t.unit == "us" and t.tz in ("UTC", "+00:00", "Z")


def datetimes(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A ``timestamp[us, UTC]`` column as aware datetimes (UTC), None where null: ``to_pylist``'s values.

    Arrow's ``to_pylist`` makes each one through its time-zone machinery, 3 us a value every time
    (0.3 s of the fold's reading of 100k events; measured again in one process, it does not warm
    up); this is 0.5 us. (The other way, datetimes into Arrow, is 0.25 us a value once Arrow has
    loaded the zone: nothing to gain there.)
    """
    add = _EPOCH.__add__
    return [
        None if u is None else add(dt.timedelta(microseconds=u)) for u in column.cast(pa.int64()).to_pylist()
    ]


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
        "type": event.type,  # type: ignore[attr-defined]
        "ts": ts,
        "event_date": ts.date(),
        "schema_version": written_version if written_version is not None else event.schema_version,  # type: ignore[attr-defined]
        "producer": event.producer.model_dump_json(),
        "payload": event.payload.model_dump_json(),  # type: ignore[attr-defined]
        "topic": topic,
        "partition": partition,
        "offset": offset,
    }


class EventColumns:
    """``events`` rows of parsed events gathered column by column, then one Arrow table.

    What :func:`event_row` gives for each event, without a dict per event and without Arrow
    turning a list of dicts into columns (the pipeline's parse step makes tens of thousands a
    batch).
    """

    __slots__ = ("_add", "_cols")

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {name: [] for name in TABLES["events"].names}
        self._add = tuple(self._cols[name].append for name in TABLES["events"].names)

    def add(
        self, event: EventBase, topic: str, partition: int, offset: int, written_version: int | None = None
    ) -> None:
        """Add the row of ``event``, read at ``topic``/``partition``/``offset``."""
        (
            event_id,
            episode_id,
            seq,
            type_,
            ts,
            event_date,
            version,
            producer,
            payload,
            topic_,
            partition_,
            offset_,
        ) = self._add  # fmt: skip  (the columns in the schema's order)
        # every value first: one that raises (a string pydantic will not serialise) adds nothing,
        # and the columns keep one length
        when: dt.datetime = event.ts
        producer_json = event.producer.model_dump_json()
        payload_json = event.payload.model_dump_json()  # type: ignore[attr-defined]
        day = when.date()
        written = written_version if written_version is not None else event.schema_version  # type: ignore[attr-defined]
        event_id(event.event_id)
        episode_id(event.episode_id)
        seq(event.seq)
        type_(event.type)  # type: ignore[attr-defined]
        ts(when)
        event_date(day)
        version(written)
        producer(producer_json)
        payload(payload_json)
        topic_(topic)
        partition_(partition)
        offset_(offset)

    def __len__(self) -> int:
        return len(self._cols["event_id"])

    def table(self) -> pa.Table:
        """The rows added, in the ``events`` schema."""
        return pa.Table.from_pydict(self._cols, schema=TABLES["events"])


def row_to_event(row: Mapping[str, Any]) -> EventBase:
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


def assemble(episode_id: str, rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows of the derived tables for one stream (an episode, or a control stream), from its ``events`` rows.

    A control stream is one row of its table: the row its first (checkpoints)
    or latest (admissions) event in the log records.
    """
    stream = stream_kind(episode_id)
    if stream is not None:
        # by log position, never by the producer's clock: one stream is one key, so one partition
        ordered = sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))
        if not ordered:
            return {}
        # a checkpoint is recorded once: its first event stands; an admission is re-run: its latest
        pick = ordered[0] if stream.first_wins else ordered[-1]
        return {stream.table: [control_row(row_to_event(pick))[1]]}
    return episode_tables(fold_episode(episode_id, rows))


def episode_tables(state: Any) -> dict[str, list[dict[str, Any]]]:
    """The rows of every episode table of a folded episode."""
    return {
        "episodes": [episode_row(state)],
        "steps": step_rows(state),
        "rewards": reward_rows(state),
        "failures": failure_rows(state),
        "samples": sample_rows(state),
    }


def dead_letter(episode_id: str, rows: Sequence[Mapping[str, Any]], exc: BaseException) -> dict[str, Any]:
    """The ``quarantine`` row of a stream whose events could not be folded.

    Keyed by the log position of the stream's first event (a stream failing again
    rewrites the same row); its ``raw`` value
    lists the stream's event ids, so nothing is lost and the stream can be
    folded again once the cause is fixed (``trajlake replay``).
    """
    last = min(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return {
        "topic": last["topic"],
        "partition": last["partition"],
        "offset": last["offset"],
        "key": episode_id.encode(),
        "raw": json.dumps(
            {"episode_id": episode_id, "event_ids": sorted(r["event_id"] for r in rows)}
        ).encode(),
        "error": f"{FOLD_ERROR}{episode_id[:200]}: {type(exc).__name__}: {exc}"[:4000],
        "error_fields": ["<fold>"],
        "kafka_ts": None,
    }


@dataclass
class Folded:
    """What :func:`fold_events` gives: each derived table's rows, and the streams it could not fold."""

    tables: dict[str, pa.Table] = field(default_factory=dict)
    """Rows by table name (only tables with rows)."""
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    """``quarantine`` rows of streams whose fold raised (see :func:`dead_letter`)."""
    failed: list[str] = field(default_factory=list)
    """Those streams' ids: their stored rows stay as they were."""
    removed: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    """Control tables' keys of streams whose events are all gone (their row goes too)."""


def fold_events(episode_ids: Iterable[str], events: pa.Table) -> Folded:
    """Fold the ``events`` rows of the streams ``episode_ids`` (one Arrow table) into every derived table.

    A stream of ``episode_ids`` with no row in ``events`` (its events lost an id conflict) gives
    no rows, so its stored rows are removed; a stream whose fold raises (an event the parser
    accepted but the projection cannot use) is a dead letter and its neighbours are folded as
    usual.
    """
    cols = {
        c: datetimes(events.column(c))
        if _utc_micros(events.schema.field(c))
        else events.column(c).to_pylist()
        for c in EVENT_COLUMNS
        if c in events.column_names
    }
    by_stream: dict[str, list[int]] = {}
    for i, eid in enumerate(cols.get("episode_id", ())):
        by_stream.setdefault(eid, []).append(i)
    folded: list[tuple[str, list[int], dict[str, list[dict[str, Any]]]]] = []
    done = Folded()

    def row(i: int) -> dict[str, Any]:
        r = {c: v[i] for c, v in cols.items()}
        if "producer" in events.column_names:
            r["producer"] = events.column("producer")[i].as_py()
        return r

    for episode_id in dict.fromkeys(episode_ids):
        idx = by_stream.get(episode_id, [])
        stream = stream_kind(episode_id)
        if not idx:
            if stream is not None:
                done.removed.setdefault(stream.table, []).append(stream_key(episode_id))
            continue
        try:
            if stream is not None:
                got = assemble(episode_id, [row(i) for i in idx])
            else:
                views = []
                for i in idx:
                    payload, p = decode_payload(cols["type"][i], cols["payload"][i])
                    views.append(EventView(cols["event_id"][i], episode_id, cols["seq"][i], cols["type"][i],
                                           cols["ts"][i], payload, p))  # fmt: skip
                got = episode_tables(fold_episode(episode_id, views))
        except Exception as exc:  # noqa: BLE001 - one unfoldable stream never stops the batch
            done.dead_letters.append(dead_letter(episode_id, [row(i) for i in idx], exc))
            done.failed.append(episode_id)
            continue
        folded.append((episode_id, idx, got))
    try:
        done.tables = _tables(got for _, _, got in folded)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        # a row that does not fit its table's types (a value stored before a narrower type was
        # declared, say): that stream is a dead letter, not the chunk
        good = []
        for episode_id, idx, got in folded:
            try:
                _tables([got])
            except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
                done.dead_letters.append(dead_letter(episode_id, [row(i) for i in idx], exc))
                done.failed.append(episode_id)
            else:
                good.append(got)
        done.tables = _tables(good)
    return done


def _tables(streams: Iterable[dict[str, list[dict[str, Any]]]]) -> dict[str, pa.Table]:
    """Each table's rows of ``streams`` as one Arrow table (tables without rows left out)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for got in streams:
        for name, rows in got.items():
            out.setdefault(name, []).extend(rows)
    return {n: rows_table(rows, TABLES[n]) for n, rows in out.items() if rows}


def rows_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, a column at a time (a third of its time).

    A key a row lacks is a null, a key the schema lacks is left out, as ``from_pylist`` does;
    Arrow's ``from_pylist`` converted 25k ``steps`` rows in 138 ms, this in 43 ms.
    """
    return pa.Table.from_pydict({c: [r.get(c) for r in rows] for c in schema.names}, schema=schema)
