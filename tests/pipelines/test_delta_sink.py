"""Exactly-once Delta commits on real tables (delta-rs) under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from fold.projection import episode_row, fold_episode
from fold.rows import event_row
from lake import Lake, LakeError
from schemas import TABLES, parse_event
from tests.pipelines.factories import ended, started, typed


def events_table(n: int, start: int = 0) -> pa.Table:
    rows = [event_row(parse_event(started(f"e{i}")), "t", 0, i) for i in range(start, start + n)]
    return pa.Table.from_pylist(rows, schema=TABLES["events"])


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lk = Lake(tmp_path / "lake")
    lk.ensure()
    return lk


def test_tables_are_created_with_the_design_schemas_and_partitions(lake: Lake) -> None:
    for name in ("events", "quarantine", "episodes", "steps", "rewards", "failures"):
        dt = DeltaTable(lake.uri(name))
        assert [f.name for f in dt.schema().fields] == TABLES[name].names
    assert DeltaTable(lake.uri("events")).metadata().partition_columns == ["event_date"]


def test_txn_makes_a_rerun_a_no_op(lake: Lake) -> None:
    t = events_table(10)
    assert lake.write("events", t, mode="insert_new", txns={"p:t:0": 9}) is True
    assert lake.write("events", t, mode="insert_new", txns={"p:t:0": 9}) is False
    assert lake.read("events").num_rows == 10
    assert lake.table("events").version() == 1
    assert lake.txn_version("events", "p:t:0") == 9


def test_insert_new_never_duplicates_an_event_id(lake: Lake) -> None:
    first = events_table(10)
    lake.write("events", first, mode="insert_new", txns={"p:t:0": 9})
    # The next range re-delivers five of the same events (duplicates from a producer retry).
    overlap = pa.concat_tables([first.slice(5), events_table(3, start=10)])
    lake.write("events", overlap, mode="insert_new", txns={"p:t:0": 17})
    ids = lake.read("events").column("event_id").to_pylist()
    assert len(ids) == len(set(ids)) == 13


def test_upsert_replaces_by_key(lake: Lake) -> None:
    docs = [started("e1")]
    open_row = episode_row(fold_episode("e1", typed(*docs)))
    lake.write(
        "episodes",
        pa.Table.from_pylist([open_row], schema=TABLES["episodes"]),
        mode="upsert",
        txns={"p:t:0": 0},
    )
    closed = episode_row(fold_episode("e1", typed(*docs, ended("e1", 1, "failure"))))
    lake.write(
        "episodes",
        pa.Table.from_pylist([closed], schema=TABLES["episodes"]),
        mode="upsert",
        txns={"p:t:0": 1},
    )
    [row] = lake.read("episodes").to_pylist()
    assert (row["completeness"], row["status"]) == ("complete", "failure")


def test_replace_episodes_deletes_rows_that_disappeared(lake: Lake) -> None:
    def frow(e: str, v: str) -> dict:  # type: ignore[type-arg]
        return {
            "episode_id": e,
            "judge_name": "j",
            "judge_version": v,
            "category": "test_failure",
            "failing_seq": 1,
            "signature": "s",
            "message": "m",
            "task_id": "t",
            "policy_version": "0",
        }

    lake.write(
        "failures",
        pa.Table.from_pylist(
            [frow("e1", "v1"), frow("e1", "v2"), frow("e2", "v1")], schema=TABLES["failures"]
        ),
        mode="upsert",
        txns={"a": 1},
    )
    # e1 was re-judged: v1 now passes; e2 untouched by this batch keeps its row.
    lake.write(
        "failures",
        pa.Table.from_pylist([frow("e1", "v2")], schema=TABLES["failures"]),
        mode="replace_episodes",
        txns={"a": 2},
        episodes=["e1"],
    )
    got = sorted((r["episode_id"], r["judge_version"]) for r in lake.read("failures").to_pylist())
    assert got == [("e1", "v2"), ("e2", "v1")]


def test_a_commit_with_unknown_outcome_is_resolved_by_rereading(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Lake._commit
    calls = {"n": 0}

    def landed_then_failed(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        real(self, *args, **kwargs)
        raise OSError("connection reset after commit")

    monkeypatch.setattr(Lake, "_commit", landed_then_failed)
    assert lake.write("events", events_table(4), mode="insert_new", txns={"p:t:0": 3}) is True
    assert calls["n"] == 1  # not retried: the re-read showed the commit had landed
    assert lake.read("events").num_rows == 4 and lake.table("events").version() == 1


def test_a_failing_commit_is_retried_then_reported(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("disk on fire")

    monkeypatch.setattr(Lake, "_commit", failing)
    with pytest.raises(LakeError, match="after 2 attempts"):
        lake.write("events", events_table(1), mode="insert_new", txns={"p:t:0": 0}, max_attempts=2)


def test_time_travel_reads_an_old_version(lake: Lake) -> None:
    lake.write("events", events_table(3), mode="insert_new", txns={"p:t:0": 2})
    lake.write("events", events_table(2, start=3), mode="insert_new", txns={"p:t:0": 4})
    assert lake.read("events", version=1).num_rows == 3
    assert lake.read("events").num_rows == 5
    with pytest.raises(LakeError):
        lake.read("events", version=99)


def test_a_batch_that_changes_nothing_still_records_its_offsets(lake: Lake) -> None:
    empty = pa.Table.from_pylist([], schema=TABLES["failures"])
    assert lake.write("failures", empty, mode="replace_episodes", txns={"p:t:0": 5}, episodes=["e1", "e2"])
    assert lake.txn_version("failures", "p:t:0") == 5
    t = events_table(3)
    lake.write("events", t, mode="insert_new", txns={"p:t:0": 2})
    # The same rows under new offsets: the MERGE inserts nothing, the offsets are recorded.
    assert lake.write("events", t, mode="insert_new", txns={"p:t:0": 9})
    assert lake.txn_version("events", "p:t:0") == 9 and lake.read("events").num_rows == 3


def test_a_table_from_an_older_schema_gets_the_new_nullable_columns(tmp_path: Path) -> None:
    import datetime as dt

    # a table from before the admission scores (and splits): the columns are added, in the schema's order
    added = ("do_nothing_score", "null_effort_max", "split")
    older = pa.schema([f for f in TABLES["tasks"] if f.name not in added])
    DeltaTable.create(str(tmp_path / "lake" / "tasks"), schema=older)
    now = dt.datetime.now(dt.UTC)
    row = {"task_id": "t1", "version": "1", "family": "f", "tier": None, "spec": "{}", "spec_digest": "d",
           "state_digest": None, "admitted": True, "reasons": [], "admitted_at": now}  # fmt: skip
    from deltalake import write_deltalake

    old_rows = pa.Table.from_pylist([row], schema=older)
    write_deltalake(str(tmp_path / "lake" / "tasks"), old_rows, mode="append")
    lake = Lake(tmp_path / "lake")
    lake.ensure(["tasks"])
    assert DeltaTable(lake.uri("tasks")).schema().to_arrow().names == TABLES["tasks"].names
    assert lake.table("tasks").version() == 3  # the columns added, then the file size set
    lake.ensure(["tasks"])  # nothing left to add: no new commit
    assert lake.table("tasks").version() == 3
    # two processes upgrading one table at once: the one whose commit loses finds the columns there
    DeltaTable.create(str(tmp_path / "lake2" / "tasks"), schema=older)
    other = Lake(tmp_path / "lake2")
    first, second = DeltaTable(other.uri("tasks")), DeltaTable(other.uri("tasks"))
    other._add_new_columns("tasks", first)
    other._add_new_columns("tasks", second)  # (its snapshot predates the first one's commit)
    assert DeltaTable(other.uri("tasks")).schema().to_arrow().names == TABLES["tasks"].names
    new = {**row, "task_id": "t2", "do_nothing_score": 0.25}
    lake.write("tasks", pa.Table.from_pylist([new], schema=TABLES["tasks"]), mode="upsert")
    got = {r["task_id"]: r["do_nothing_score"] for r in lake.read("tasks").to_pylist()}
    assert got == {"t1": None, "t2": 0.25}


def test_held_snapshots_are_one_table_per_thread_kept_up_to_date(lake: Lake) -> None:
    import threading

    from deltalake import write_deltalake

    from lake.store import held_snapshots

    assert lake.table("events") is not lake.table("events")  # outside the block: opened each time
    with held_snapshots():
        held = lake.table("events")
        assert Lake(lake.root).table("events") is held  # another Lake of the same root: the same one
        before = held.version()
        # a commit made elsewhere (another process's writer, here a handle of its own) is seen
        write_deltalake(lake.uri("events"), events_table(1), mode="append")
        assert lake.table("events") is held and held.version() == before + 1
        assert lake.table("events", version=before).version() == before  # time travel: never held
        assert lake.table("events").version() == before + 1
        other: list[DeltaTable] = []
        t = threading.Thread(target=lambda: other.append(lake.table("events")))
        t.start()
        t.join()
        assert other[0] is not held  # another thread opens its own
    assert lake.table("events") is not held


def test_txn_versions_agree_with_delta_rs_after_other_writers_and_a_remade_table(lake: Lake) -> None:
    import shutil

    from deltalake import CommitProperties, Transaction, write_deltalake

    def truth(apps: list[str]) -> dict[str, int | None]:
        dt = DeltaTable(lake.uri("rewards"))
        return {a: (None if (v := dt.transaction_version(a)) is None else int(v)) for a in apps}

    apps = ["p:t:0", "p:t:1", "p:t:2"]
    empty = pa.Table.from_pylist([], TABLES["rewards"])
    assert lake.txn_versions("rewards", apps) == truth(apps) == dict.fromkeys(apps)
    lake.write("rewards", empty, mode="upsert", txns={"p:t:0": 4})
    assert lake.txn_versions("rewards", apps) == truth(apps)
    # Commits this Lake never made (another writer; a commit naming an app never asked about): the
    # answers come from the commits since the version it knew, and equal delta-rs's.
    for app, v in (("p:t:1", 7), ("p:t:0", 9), ("p:t:9", 3)):
        props = CommitProperties(app_transactions=[Transaction(app_id=app, version=v)])
        write_deltalake(lake.uri("rewards"), empty, mode="append", commit_properties=props)
    assert lake.txn_versions("rewards", [*apps, "p:t:9"]) == truth([*apps, "p:t:9"])
    assert lake.txn_versions("rewards", apps) == {"p:t:0": 9, "p:t:1": 7, "p:t:2": None}
    assert Lake(lake.root).txn_version("rewards", "p:t:9") == 3  # another Lake of the root agrees
    # Removed and made again: its versions restart, and nothing known of the old table is reused.
    shutil.rmtree(lake.uri("rewards"))
    lake.ensure()
    lake.write("rewards", empty, mode="upsert", txns={"p:t:2": 1})
    assert lake.txn_versions("rewards", [*apps, "p:t:9"]) == truth([*apps, "p:t:9"])
    assert lake.txn_versions("rewards", apps) == {"p:t:0": None, "p:t:1": None, "p:t:2": 1}


def test_a_table_remade_or_restored_is_never_answered_from_what_was_known_of_it(lake: Lake) -> None:
    import shutil
    import threading

    from lake.store import held_snapshots

    empty = pa.Table.from_pylist([], TABLES["rewards"])
    app, other = "p:t:0", "p:t:1"
    uri = lake.uri("rewards")

    def truth() -> int | None:
        return DeltaTable(uri).transaction_version(app)

    with held_snapshots():
        for v in (300, 600, 900):
            lake.write("rewards", empty, mode="upsert", txns={app: v})
        held = lake.table("rewards")
        assert lake.txn_versions("rewards", [app]) == {app: 900} and held.version() == 3

        def remake() -> None:  # another writer (its own thread: its own snapshots)
            shutil.rmtree(uri)
            lk = Lake(lake.root)
            lk.ensure(["rewards"])
            for a, v in ((app, 100), (app, 200), (other, 1), (other, 2)):
                lk.write("rewards", empty, mode="upsert", txns={a: v})

        t = threading.Thread(target=remake)
        t.start()
        t.join(60)
        # past the held version: the held snapshot is opened anew, not brought forward
        assert DeltaTable(uri).version() == 4
        assert lake.txn_versions("rewards", [app]) == {app: 200} == {app: truth()}
        assert lake.table("rewards").metadata().id == DeltaTable(uri).metadata().id
    # Restored from a copy (the same Delta id, an older history): nothing of the newer one is kept.
    backup = Path(lake.root) / "backup"
    shutil.copytree(uri, backup)  # at version 4: app at 200
    lake.write("rewards", empty, mode="upsert", txns={app: 250})
    assert lake.txn_versions("rewards", [app]) == {app: 250}
    shutil.rmtree(uri)
    shutil.copytree(backup, uri)
    assert lake.txn_versions("rewards", [app]) == {app: 200} == {app: truth()}
    assert lake.write("rewards", empty, mode="upsert", txns={app: 230}) is True  # the restored v5
    assert lake.txn_versions("rewards", [app]) == {app: 230} == {app: truth()}
    assert lake.write("rewards", empty, mode="upsert", txns={app: 250}) is True  # not taken as landed
    assert truth() == 250


def test_held_snapshots_outlive_their_block_in_their_thread_and_are_checked_before_reuse(lake: Lake) -> None:
    import shutil

    from deltalake import write_deltalake

    from lake.store import forget_held_snapshots, held_snapshots

    with held_snapshots():
        held = lake.table("events")
        at = held.version()
        # its own commit (a merge through the held handle): still the same snapshot, not reopened
        lake.write("events", events_table(2), mode="insert_new")
        assert lake.table("events") is held and held.version() == at + 1
        assert lake.table("events", version=at + 1) is held  # time travel to the version held
        assert lake.table("events", version=at) is not held
    # the next block of this thread starts from it (a commit made elsewhere meanwhile is read)
    write_deltalake(lake.uri("events"), events_table(1), mode="append")
    with held_snapshots():
        assert lake.table("events") is held and held.version() == at + 2
    # removed and made again between blocks: the kept snapshot is not used on the new table
    shutil.rmtree(lake.uri("events"))
    lake.ensure(["events"])
    with held_snapshots():
        fresh = lake.table("events")
        assert fresh is not held and fresh.version() == 0
        assert lake.read("events").num_rows == 0
    forget_held_snapshots()
    with held_snapshots():
        assert lake.table("events") is not fresh


def test_a_kept_snapshot_is_stamped_where_its_own_commits_left_it(lake: Lake) -> None:
    """A compaction through the held snapshot moves it on; a log rolled back under it is then seen.

    (Found by review: kept with the stamp of the version it was last asked for, the snapshot would
    carry the compaction's files past a rollback of the log that keeps the older commit's file.)
    """
    from deltalake import write_deltalake

    from lake.store import held_snapshots

    for i in range(3):
        write_deltalake(lake.uri("events"), events_table(1 + i), mode="append")
    with held_snapshots():
        held = lake.table("events")
        at = held.version()
        assert lake.compact("events", min_files=2) is not None and held.version() == at + 1
    (Path(lake.uri("events")) / "_delta_log" / f"{at + 1:020d}.json").unlink()  # rolled back
    with held_snapshots():
        now = lake.table("events")
        assert now is not held and now.version() == at
        assert lake.read("events").num_rows == 6
