"""The fold package: stored rows read as a full parse would, many streams folded at once, no I/O."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

import fold
from fold import EPISODE_TABLES, assemble, event_row, fold_episode, fold_events, row_to_event
from fold.rows import episode_tables
from schemas import parse_event
from schemas.codec import parse_event_as_written
from schemas.control import stream_kind
from schemas.errors import SchemaError
from schemas.tables import TABLES
from tests.pipelines.factories import call, ended, model, result, reward, sandbox, started
from tests.pipelines.log_workload import make_workload


def _rows(records: list[tuple[str, bytes, bytes]]) -> list[dict[str, Any]]:
    """``events`` rows of the records that parse (as the pipeline stores them)."""
    out = []
    for off, (topic, _, value) in enumerate(records):
        try:
            event, written = parse_event_as_written(value)
        except SchemaError:
            continue
        out.append(event_row(event, topic, 0, off, written_version=written))
    return out


@pytest.fixture(scope="module")
def workload_rows() -> list[dict[str, Any]]:
    w = make_workload(120, seed=11)
    return _rows(w.phase1 + w.phase2)


def _by_stream(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["episode_id"], []).append(r)
    return out


def test_folding_stored_rows_equals_folding_the_events_parsed_again(
    workload_rows: list[dict[str, Any]],
) -> None:
    """The fold reads a row's payload without building its model: the rows are the ones a full parse gives."""
    streams = _by_stream(workload_rows)
    episodes = [e for e in streams if stream_kind(e) is None]
    assert len(episodes) >= 100
    for eid in episodes:
        fast = episode_tables(fold_episode(eid, streams[eid]))
        parsed = episode_tables(fold_episode(eid, [row_to_event(r) for r in streams[eid]]))
        assert fast == parsed, eid


def test_fold_events_gives_per_stream_rows_as_arrow_tables(workload_rows: list[dict[str, Any]]) -> None:
    streams = _by_stream(workload_rows)
    ids = [*streams, "gone-episode"]  # an episode whose events all went: it gives no rows
    done = fold_events(ids, pa.Table.from_pylist(workload_rows[::-1], schema=TABLES["events"]))
    assert not done.failed and not done.dead_letters
    expected: dict[str, list[dict[str, Any]]] = {}
    for eid, rows in streams.items():
        for name, got in assemble(eid, rows).items():
            expected.setdefault(name, []).extend(got)
    for name in EPISODE_TABLES:
        table = done.tables[name]
        assert table.schema.equals(TABLES[name])
        key = ("episode_id", "seq") if name == "steps" else ("episode_id",)
        want = pa.Table.from_pylist(expected[name], schema=TABLES[name]).to_pylist()
        assert sorted(table.to_pylist(), key=lambda r: [repr(r[k]) for k in key] + [repr(r)]) == sorted(
            want, key=lambda r: [repr(r[k]) for k in key] + [repr(r)]
        ), name
    assert "gone-episode" not in {r["episode_id"] for r in done.tables["episodes"].to_pylist()}


def test_a_payload_stored_by_an_older_schema_is_read_at_the_current_one() -> None:
    """A payload missing a field of today's model (written before it existed) reads as a fresh parse."""
    tokens = {"prompt_token_ids": [1], "completion_token_ids": [2], "completion_logprobs": [-1.0]}
    docs = [started("e1"), model("e1", 1, **tokens), ended("e1", 2)]
    rows = [event_row(parse_event(d), "t", 0, i) for i, d in enumerate(docs)]
    old = dict(rows[1])
    p = json.loads(old["payload"])
    del p["history_break"], p["served_by"]  # fields with defaults
    old["payload"] = json.dumps(p)
    got = assemble("e1", [rows[0], old, rows[2]])
    assert got == assemble("e1", rows)
    assert orjson.loads(got["steps"][1]["payload"]) == orjson.loads(rows[1]["payload"])


def test_a_stream_whose_stored_payload_is_not_valid_is_a_dead_letter_and_its_neighbours_fold() -> None:
    docs = [started("bad"), call("bad", 1), started("ok"), ended("ok", 1)]
    rows = [event_row(parse_event(d), "t", 0, i) for i, d in enumerate(docs)]
    rows[1] = {**rows[1], "payload": json.dumps({"call_id": "", "tool": "bash"})}  # no longer valid
    done = fold_events(["bad", "ok"], pa.Table.from_pylist(rows, schema=TABLES["events"]))
    assert done.failed == ["bad"]
    [letter] = done.dead_letters
    assert letter["error"].startswith(
        f"{fold.FOLD_ERROR}bad: SchemaError: invalid tool_call event: payload.call_id"
    )
    assert json.loads(letter["raw"])["event_ids"] == sorted(r["event_id"] for r in rows[:2])
    assert [r["episode_id"] for r in done.tables["episodes"].to_pylist()] == ["ok"]


def test_every_kind_of_step_reads_the_same_from_rows_and_from_events() -> None:
    docs = [
        started("e1", sampling={"temperature": 0.7, "extra": {"top_k": 5}}),
        model("e1", 1, finish_reason="length", tool_calls=[{"id": "a", "x": None}]),
        call("e1", 2, tool="bash", cmd="ls", n=3),
        result("e1", 3, exit_code=1, stdout="AssertionError: 1 != 2", stderr="boom"),
        sandbox("e1", 4, "crashed", detail="oom"),
        reward("e1", 5, "error"),
        ended("e1", 6, "infra_error", reason="sandbox died"),
    ]
    events = [parse_event(d) for d in docs]
    rows = [event_row(e, "t", 0, i) for i, e in enumerate(events)]
    assert episode_tables(fold_episode("e1", rows)) == episode_tables(fold_episode("e1", events))


def test_the_fold_package_imports_no_beam_no_lake_and_no_io() -> None:
    """``fold`` sits between ``schemas`` and ``lake``: no Beam, no lake, no pipelines in it."""
    allowed = {"fold", "schemas", "pyarrow", "orjson", "pydantic", "__future__", "collections", "dataclasses",
               "datetime", "functools", "json", "re", "typing"}  # fmt: skip
    root = Path(fold.__file__).parent
    seen = set()
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                seen.add(name.split(".")[0])
    assert seen - allowed == set(), f"fold imports {sorted(seen - allowed)}"
    assert {"schemas", "pyarrow", "orjson"} <= seen


def test_integers_past_64_bits_read_as_python_reads_them() -> None:
    """orjson turns a 30-digit integer into a float (and refuses larger ones); the fold reads them whole."""
    evidence = {"big": 2**70, "neg": -(2**65)}
    docs = [started("ep"), call("ep", 1, n=10**30, m=10**400), reward("ep", 2, "fail", evidence=evidence),
            ended("ep", 3, "failure")]  # fmt: skip
    rows = [event_row(parse_event(d), "t", 0, i) for i, d in enumerate(docs)]
    got = assemble("ep", rows)
    assert got == episode_tables(fold_episode("ep", [row_to_event(r) for r in rows]))
    assert json.loads(got["steps"][1]["text"]) == {"n": 10**30, "m": 10**400}
    assert json.loads(got["rewards"][0]["evidence"]) == evidence


def test_a_stored_value_that_no_longer_fits_its_column_is_a_dead_letter_not_the_chunks() -> None:
    """A payload with today's keys but a value today's types refuse (stored before they were narrowed)."""
    docs = [started("old"), result("old", 1, exit_code=1), started("new"), ended("new", 1)]
    rows = [event_row(parse_event(d), "t", 0, i) for i, d in enumerate(docs)]
    payload = json.loads(rows[1]["payload"])
    payload["exit_code"] = 2**40  # an int64 then; the steps column is int32 now
    rows[1] = {**rows[1], "payload": json.dumps(payload)}
    done = fold_events(["old", "new"], pa.Table.from_pylist(rows, schema=TABLES["events"]))
    assert done.failed == ["old"] and done.dead_letters[0]["error"].startswith(f"{fold.FOLD_ERROR}old: ")
    assert [r["episode_id"] for r in done.tables["episodes"].to_pylist()] == ["new"]


def test_event_columns_give_the_rows_event_row_gives() -> None:
    """The parse step's column-by-column ``events`` rows equal :func:`event_row`'s, upcast versions too."""
    from fold.rows import EventColumns

    w = make_workload(40, seed=5)
    cols, rows = EventColumns(), []
    for off, (topic, _, value) in enumerate(w.phase1 + w.phase2):
        try:
            event, written = parse_event_as_written(value)
        except SchemaError:
            continue
        cols.add(event, topic, 3, off, written_version=written)
        rows.append(event_row(event, topic, 3, off, written_version=written))
    legacy = {**model("ep-old", 1), "schema_version": 1}
    event, written = parse_event_as_written(json.dumps(legacy))
    cols.add(event, "t", 0, 9, written_version=written)
    rows.append(event_row(event, "t", 0, 9, written_version=written))
    assert len(cols) == len(rows) > 100
    assert cols.table().equals(pa.Table.from_pylist(rows, schema=TABLES["events"]))


def test_utc_timestamps_read_from_arrow_as_arrow_reads_them() -> None:
    """The fold's own reading of timestamps (Arrow's goes through the zone, 6x slower): Arrow's values."""
    import datetime as dt

    from fold.rows import datetimes

    utc = pa.timestamp("us", tz="UTC")
    plus2 = dt.timezone(dt.timedelta(hours=2))
    values = [
        dt.datetime(2026, 12, 4, 10, 11, 12, 999_999, tzinfo=dt.UTC),
        None,
        dt.datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=dt.UTC),  # before the epoch
        dt.datetime(2026, 6, 1, 1, 0, 0, 7, tzinfo=plus2),  # another offset: the same instant in UTC
        dt.datetime(1, 1, 1, tzinfo=dt.UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC),
    ]
    arrow = pa.array(values, type=utc)
    got = datetimes(arrow)
    assert got == arrow.to_pylist() == values and datetimes(pa.chunked_array([arrow, arrow])) == values * 2
    assert [v.isoformat() for v in got if v] == [v.isoformat() for v in arrow.to_pylist() if v]


def test_rows_become_the_table_arrow_makes_of_them() -> None:
    """``rows_table`` is ``from_pylist``: missing keys null, extra keys dropped, the same errors."""
    import datetime as dt
    import random

    from fold.rows import rows_table

    rnd = random.Random(5)
    schema = TABLES["steps"]
    when = dt.datetime(2026, 12, 5, 1, 2, 3, 456789, tzinfo=dt.UTC)
    for n in (0, 1, 7, 300):
        rows = []
        for i in range(n):
            row = {
                "episode_id": f"ep{rnd.randrange(9)}", "seq": i, "event_id": f"e{i}", "type": "tool_result",
                "ts": when + dt.timedelta(seconds=i), "exit_code": rnd.choice([None, 0, 1]),
                "timed_out": rnd.choice([True, False]), "duration_s": rnd.random(), "text": "x" * i,
                "not_a_column": object(),
            }  # fmt: skip
            for key in rnd.sample(sorted(row), rnd.randrange(3)):  # some keys left out
                del row[key]
            rows.append(row)
        assert rows_table(rows, schema).equals(pa.Table.from_pylist(rows, schema=schema))
    for bad in ({"seq": "seven"}, {"exit_code": 2**40}, {"ts": "yesterday"}):
        with pytest.raises((pa.ArrowException, OverflowError, TypeError, ValueError)):
            pa.Table.from_pylist([bad], schema=schema)
        with pytest.raises((pa.ArrowException, OverflowError, TypeError, ValueError)):
            rows_table([bad], schema)
