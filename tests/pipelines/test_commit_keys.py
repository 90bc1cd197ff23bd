"""A commit's keys compared in Arrow give what Python's sets of tuples give."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa

from lake.store import _key_tuples, _keys_missing, _rows_keyed, key_predicate

COLS = ["episode_id", "step", "day"]


def _table(rnd: random.Random, n: int, nulls: bool = False) -> pa.Table:
    def ep() -> str | None:
        return None if nulls and rnd.random() < 0.1 else f"ep-{rnd.randrange(40):03d}"

    return pa.table(
        {
            "episode_id": pa.array([ep() for _ in range(n)], pa.string()),
            "step": pa.array([rnd.randrange(6) for _ in range(n)], pa.int32()),
            "day": pa.array([dt.date(2026, 12, 1 + rnd.randrange(3)) for _ in range(n)], pa.date32()),
            "payload": pa.array(["x" * rnd.randrange(5) for _ in range(n)], pa.string()),
        }
    )


def test_missing_keys_and_keyed_rows_match_python_sets() -> None:
    rnd = random.Random(7)
    for i in range(60):
        nulls = i % 3 == 2  # a null key equals a null key, as in Python (Arrow's join alone says no)
        data, stored = _table(rnd, rnd.randrange(0, 300), nulls), _table(rnd, rnd.randrange(0, 300), nulls)
        have = set(_key_tuples(data, COLS))
        named = set(_key_tuples(_table(rnd, rnd.randrange(0, 30), nulls), COLS))
        assert _keys_missing(stored, data, COLS) == set(_key_tuples(stored, COLS)) - have
        assert _keys_missing(named, data, COLS) == named - have
        keyed = {i for i, k in enumerate(_key_tuples(data, COLS)) if k in named}
        assert _rows_keyed(data, named, COLS) == keyed
        # stored keys typed differently (large strings, int64) are compared by value
        wide = stored.cast(
            pa.schema([pa.field("episode_id", pa.large_string()), pa.field("step", pa.int64()),
                       stored.schema.field("day"), stored.schema.field("payload")])
        )  # fmt: skip
        assert _keys_missing(wide, data, COLS) == set(_key_tuples(stored, COLS)) - have


def test_a_key_predicate_from_an_arrow_column_is_the_one_from_its_values() -> None:
    rnd = random.Random(3)
    for n in (0, 1, 5, 19, 20, 21, 500):
        values = [f"0190{rnd.randrange(16**6):06x}-{rnd.randrange(100)}" for _ in range(n)]
        column = pa.chunked_array(
            [pa.array(values[: n // 2], pa.string()), pa.array(values[n // 2 :], pa.string())]
        )
        assert key_predicate("episode_id", column, alias="t.") == key_predicate(
            "episode_id", values, alias="t."
        )
        ints = [rnd.randrange(10_000) for _ in range(n)]
        assert key_predicate("offset", pa.array(ints, pa.int64())) == key_predicate("offset", ints)
