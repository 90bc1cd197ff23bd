"""Control streams: the log's record of what is not an episode (checkpoints, task admissions, curation).

A control stream is a sequence of ``annotation`` events whose ``episode_id``
names the row they describe: ``checkpoint:<checkpoint_id>`` on the learner's
topic, ``task:<task_id>@<version>`` on the tasks topic, ``case:<case_id>`` (a
failure case) and ``drift:<episode_id>@<run_id>`` (a drift check's result) on
the curation topic. The annotation's value is the whole row of the
``checkpoints``, ``tasks``, ``failure_cases`` or ``drift`` table (timestamps as ISO
8601 strings), so those tables are projections of the log like every other:
the pipeline folds each stream into its row (the latest event wins), and a
replay rebuilds them.

:func:`control_event` writes such an event; :func:`control_row` reads one back
into its table row, checking it against the table's schema and its stream id,
and raises :class:`~schemas.errors.SchemaError` otherwise (the pipeline
quarantines it).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from schemas.errors import SchemaError
from schemas.events import Annotation, AnnotationPayload, EventBase, Producer
from schemas.ids import new_id
from schemas.tables import PRIMARY_KEYS, TABLES


@dataclass(frozen=True)
class ControlStream:
    """One kind of control stream and the table it projects to."""

    kind: str
    """The ``episode_id`` prefix before ``:``."""
    table: str
    """The table each stream is a row of."""
    key: str
    """The annotation's ``key``."""
    author: str
    """The annotation's ``author`` (who may write such a stream)."""
    stream_of: Callable[[Mapping[str, Any]], str]
    """The stream id of a row (``<kind>:<row id>``)."""
    first_wins: bool = False
    """Whether the stream's first event in the log is its row (else its latest)."""


CHECKPOINT = ControlStream(
    kind="checkpoint",
    table="checkpoints",
    key="checkpoint",
    author="learner",
    stream_of=lambda row: f"checkpoint:{row['checkpoint_id']}",
    first_wins=True,
)
TASK = ControlStream(
    kind="task",
    table="tasks",
    key="task_admission",
    author="admission",
    stream_of=lambda row: f"task:{row['task_id']}@{row['version']}",
)
CASE = ControlStream(
    kind="case",
    table="failure_cases",
    key="failure_case",
    author="curator",
    stream_of=lambda row: f"case:{row['case_id']}",
)
DRIFT = ControlStream(
    kind="drift",
    table="drift",
    key="drift_check",
    author="drift",
    stream_of=lambda row: f"drift:{row['episode_id']}@{row['run_id']}",
)
REVIEW_ITEM = ControlStream(
    kind="review_item",
    table="review_queue",
    key="review_item",
    author="review_sampler",
    stream_of=lambda row: f"review_item:{row['item_id']}",
    first_wins=True,  # an item is queued once; filling again never rewrites why it is there
)
REVIEW = ControlStream(
    kind="review",
    table="reviews",
    key="review",
    author="reviewer",
    stream_of=lambda row: f"review:{row['episode_id']}@{row['reviewer']}",
)
RETRACTION = ControlStream(
    kind="retraction",
    table="retractions",
    key="retraction",
    author="curator",
    stream_of=lambda row: f"retraction:{row['retraction_id']}",
    first_wins=True,  # what a retraction names never changes once in the log
)
STREAMS: dict[str, ControlStream] = {
    s.kind: s for s in (CHECKPOINT, TASK, CASE, DRIFT, REVIEW_ITEM, REVIEW, RETRACTION)
}
RETRACTION_SCOPES = ("episode", "group", "task_version", "judge_version")
"""What a retraction can take out of training (the last two name ``ID@VERSION``)."""
REVIEW_VERDICTS = ("ok", "hack", "judge_wrong", "task_broken")
"""What a reviewer can say of an episode: its judgement is right, it gamed the judge, the judge is
wrong about it, or its task is broken."""
REVIEWER = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""Control streams by kind."""
CONTROL_TABLES = tuple(s.table for s in STREAMS.values())
"""The tables folded from control streams."""

CASE_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")
"""What a failure case's name may be: it is the case's id, its stream's, and a task's lineage tag."""


def stream_kind(episode_id: str) -> ControlStream | None:
    """The control stream ``episode_id`` belongs to, or ``None`` for an episode."""
    kind, sep, _ = episode_id.partition(":")
    return STREAMS.get(kind) if sep else None


def stream_key(episode_id: str) -> tuple[str, ...]:
    """The primary key of the row a control stream id names (``task:a@1`` -> ``("a", "1")``)."""
    kind, _, rest = episode_id.partition(":")
    if kind in (TASK.kind, DRIFT.kind, REVIEW.kind):
        first, _, second = rest.rpartition("@")
        return (first, second)
    return (rest,)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def control_event(stream: ControlStream, row: Mapping[str, Any], worker_id: str) -> Annotation:
    """The annotation event that records ``row`` of ``stream.table``.

    Raises:
        SchemaError: the row does not fit the table (checked before anything is sent).
    """
    value = {k: _jsonable(v) for k, v in row.items()}
    event = Annotation(
        event_id=new_id(),
        episode_id=stream.stream_of(row),
        seq=0,
        ts=dt.datetime.now(dt.UTC),
        producer=Producer.here(worker_id),
        payload=AnnotationPayload(key=stream.key, value=value, author=stream.author),
    )
    control_row(event)  # the same check the pipeline makes: never publish a row it would quarantine
    return event


def _cell(name: str, type_: pa.DataType, value: Any) -> Any:
    if value is None:
        return None
    if pa.types.is_timestamp(type_):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be an ISO 8601 string")
        parsed = dt.datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError(f"{name} must carry a time zone")
        try:
            utc = parsed.astimezone(dt.UTC)
        except OverflowError as exc:
            raise ValueError(f"{name} is out of the range of dates") from exc
        if not 1970 <= utc.year <= 9999:
            raise ValueError(f"{name} must be between 1970 and 9999")
        return utc
    if pa.types.is_boolean(type_):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false")
        return value
    if pa.types.is_integer(type_):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer")
        bits = type_.bit_width
        lo, hi = (
            (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
            if pa.types.is_signed_integer(type_)
            else (0, (1 << bits) - 1)
        )
        if not lo <= value <= hi:
            raise ValueError(f"{name} must fit in {type_} ({lo}..{hi})")
        return value
    if pa.types.is_floating(type_):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number")
        return float(value)
    if pa.types.is_string(type_):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
        return value
    if pa.types.is_list(type_):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{name} must be a list of strings")
        return list(value)
    raise ValueError(f"{name} has a type control streams do not carry ({type_})")


def _case_errors(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What makes a ``failure_cases`` row inconsistent (its cells already have their types)."""
    out = []
    if not CASE_ID.fullmatch(str(row.get("case_id") or "")):
        out.append(("payload.value.case_id", f"must match {CASE_ID.pattern} (a case's name)"))
    ids = row.get("episode_ids") or []
    if not ids:
        out.append(("payload.value.episode_ids", "a case holds at least one episode"))
    elif row.get("example_episode_id") not in ids:
        out.append(("payload.value.example_episode_id", "must be one of episode_ids"))
    count = row.get("count")
    if isinstance(count, int) and count < len(ids):
        out.append(("payload.value.count", f"must be at least the {len(ids)} episode_ids it lists"))
    return out


def control_row(event: EventBase) -> tuple[ControlStream, dict[str, Any]]:
    """The table row a control stream's event records.

    Raises:
        SchemaError: ``event`` is not a control stream's event, or its value is
            not a row of the stream's table whose id is the stream's.
    """
    stream = stream_kind(event.episode_id)
    if stream is None:
        raise SchemaError(
            f"{event.episode_id!r} is not a control stream ({', '.join(k + ':...' for k in STREAMS)})",
            [("episode_id", "not a control stream")],
        )
    where = f"control stream {event.episode_id[:120]!r}"
    if not isinstance(event, Annotation):
        kind = getattr(event, "type", type(event).__name__)
        raise SchemaError(f"{where} holds a {kind} event; only annotations", [("type", "not annotation")])
    p = event.payload
    if p.key != stream.key or p.author != stream.author:
        raise SchemaError(
            f"{where} takes annotations with key {stream.key!r} by {stream.author!r}, not {p.key!r} by "
            f"{p.author!r}",
            [("payload.key", "wrong key or author")],
        )
    if not isinstance(p.value, dict):
        raise SchemaError(
            f"{where}: the value must be a row of {stream.table}", [("payload.value", "not a row")]
        )
    schema = TABLES[stream.table]
    unknown = sorted(set(p.value) - set(schema.names))
    if unknown:
        raise SchemaError(
            f"{where}: {stream.table} has no column {unknown[0]!r}",
            [(f"payload.value.{unknown[0]}", "unknown")],
        )
    row: dict[str, Any] = {}
    errors: list[tuple[str, str]] = []
    for f in schema:
        try:
            row[f.name] = _cell(f.name, f.type, p.value.get(f.name))
        except ValueError as exc:
            errors.append((f"payload.value.{f.name}", str(exc)))
            continue
        if row[f.name] is None and not f.nullable:
            errors.append((f"payload.value.{f.name}", "required"))
    for key in PRIMARY_KEYS[stream.table]:
        if row.get(key) == "":
            errors.append((f"payload.value.{key}", "must not be empty"))
    if stream is CASE:
        errors += _case_errors(row)
    if stream is TASK and row.get("split") not in (None, "train", "eval"):
        errors.append(("payload.value.split", "must be train or eval"))
    if stream is RETRACTION:
        if not CASE_ID.fullmatch(str(row.get("retraction_id") or "")):
            errors.append(("payload.value.retraction_id", f"must match {CASE_ID.pattern}"))
        scope, target = row.get("scope"), str(row.get("target") or "")
        if scope not in RETRACTION_SCOPES:
            errors.append(("payload.value.scope", f"must be one of {', '.join(RETRACTION_SCOPES)}"))
        elif scope in ("task_version", "judge_version") and not all(target.rpartition("@")[::2]):
            errors.append(("payload.value.target", f"a {scope} is NAME@VERSION"))
        elif not target:
            errors.append(("payload.value.target", "must not be empty"))
    if stream is REVIEW:
        if row.get("verdict") not in REVIEW_VERDICTS:
            errors.append(("payload.value.verdict", f"must be one of {', '.join(REVIEW_VERDICTS)}"))
        if not REVIEWER.fullmatch(str(row.get("reviewer") or "")):
            errors.append(("payload.value.reviewer", f"must match {REVIEWER.pattern}"))
    if stream is DRIFT and "@" in str(row.get("run_id") or ""):
        errors.append(
            ("payload.value.run_id", "must not contain '@' (it separates the episode from the run)")
        )
    if stream is TASK and "@" in str(row.get("task_id") or ""):
        errors.append(
            ("payload.value.task_id", "must not contain '@' (it separates the id from the version)")
        )
    if not errors:
        try:  # exactly what the pipeline will write: a row that does not convert never reaches a commit
            pa.Table.from_pylist([row], schema=schema)
        except (pa.ArrowException, OverflowError, ValueError, TypeError) as exc:
            errors.append(("payload.value", f"does not convert to the table's schema: {exc}"))
    if errors:
        raise SchemaError(f"{where}: not a row of {stream.table}: {errors[0][0]}: {errors[0][1]}", errors)
    if stream.stream_of(row) != event.episode_id:
        raise SchemaError(
            f"{where} holds the row of {stream.stream_of(row)!r}", [("episode_id", "not the row's stream")]
        )
    return stream, row
