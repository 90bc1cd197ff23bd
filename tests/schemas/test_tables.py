from __future__ import annotations

import pyarrow as pa

from schemas import PARTITION_COLUMNS, PRIMARY_KEYS, TABLES


def test_every_design_table_has_an_arrow_schema() -> None:
    assert set(TABLES) == {
        "events",
        "quarantine",
        "episodes",
        "steps",
        "rewards",
        "failures",
        "samples",
        "tasks",
        "checkpoints",
        "failure_cases",  # the improvement loop's curated cases (a control stream)
        "drift",  # drift checks' results (a control stream)
        "review_queue",  # episodes queued for review, with why (a control stream)
        "reviews",  # reviewers' verdicts (a control stream)
        "retractions",  # data taken out of training (a control stream)
    }


def test_keys_and_partitions_are_non_null_columns() -> None:
    for name, schema in TABLES.items():
        for col in PRIMARY_KEYS[name] + PARTITION_COLUMNS.get(name, ()):
            field = schema.field(col)
            assert not field.nullable, (name, col)


def test_empty_tables_can_be_built_from_the_schemas() -> None:
    for schema in TABLES.values():
        table = pa.Table.from_pylist([], schema=schema)
        assert table.schema == schema
