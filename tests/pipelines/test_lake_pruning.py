"""A batch reads the files its keys can be in, not the table: merges and lookups on real Delta tables.

The files each read and merge opens are DataFusion's and delta-rs's own counts
(``TRAJLAKE_SCAN_LOG``); a MERGE with a ``not matched by source`` clause, or an
``IN`` list past 20 values, would open every file of the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from fold.rows import event_row
from lake import Lake
from lake.store import IN_PRUNE_MAX, KEY_RANGES_MAX, PIPELINE_TABLES, SCAN_LOG_ENV, _key_ranges, key_predicate
from schemas import TABLES, parse_event
from tests.pipelines.factories import model

N_FILES = 24


def frow(episode: str, version: str) -> dict[str, object]:
    return {"episode_id": episode, "judge_name": "j", "judge_version": version, "category": "test_failure",
            "failing_seq": 1, "signature": "s", "message": "m", "task_id": "t",
            "policy_version": "0"}  # fmt: skip


def episode(batch: int, i: int) -> str:
    return f"ep-{batch:04d}-{i:03d}"  # time-ordered, like the UUIDv7 episode ids workers make


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lake:
    lk = Lake(tmp_path / "lake")
    lk.ensure()
    for b in range(N_FILES):  # one file per batch, each holding its own episodes' rows
        rows = [frow(episode(b, i), v) for i in range(30) for v in ("v1", "v2")]
        lk.write(
            "failures", pa.Table.from_pylist(rows, schema=TABLES["failures"]), mode="upsert", txns={"a": b}
        )
    monkeypatch.setenv(SCAN_LOG_ENV, str(tmp_path / "scans.jsonl"))
    return lk


def scans(tmp_path: Path) -> list[dict[str, int | str]]:
    path = tmp_path / "scans.jsonl"
    out = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    path.unlink(missing_ok=True)
    return out


def test_a_replacing_merge_opens_only_the_files_of_its_episodes(lake: Lake, tmp_path: Path) -> None:
    assert len(lake.table("failures").file_uris()) == N_FILES
    # episodes of the newest batch re-judged, and a straggler from the first: v1 now passes for all
    touched = [episode(N_FILES - 1, i) for i in range(25)] + [episode(0, 7)]
    new = pa.Table.from_pylist([frow(e, "v2") for e in touched], schema=TABLES["failures"])
    lake.write("failures", new, mode="replace_episodes", txns={"a": 100}, episodes=[*touched, episode(5, 1)])
    merges = [s for s in scans(tmp_path) if s["op"] == "merge"]
    assert len(merges) == 1 and merges[0]["files"] <= 3, merges  # the two batches' files, not all 24
    assert merges[0]["skipped"] >= N_FILES - 3
    got = {(r["episode_id"], r["judge_version"]) for r in lake.read("failures").to_pylist()}
    for e in touched:
        assert (e, "v2") in got and (e, "v1") not in got
    assert (episode(5, 1), "v1") not in got and (
        episode(5, 1),
        "v2",
    ) not in got  # named, no row left: emptied
    untouched = {(episode(b, i), v) for b in range(N_FILES) for i in range(30) for v in ("v1", "v2")}
    untouched -= {(e, v) for e in [*touched, episode(5, 1)] for v in ("v1", "v2")}
    assert untouched <= got and len(got) == len(untouched) + len(touched)


def test_tables_that_merges_rewrite_keep_files_small_and_an_older_table_gets_the_size(tmp_path: Path) -> None:
    from lake.store import FILE_TARGET_PROPERTY, REWRITTEN_FILE_BYTES

    lake = Lake(tmp_path / "lake")
    lake.ensure()
    sizes = {t: lake.table(t).metadata().configuration.get(FILE_TARGET_PROPERTY) for t in PIPELINE_TABLES}
    assert sizes.pop("events") is None  # its rows are never updated: delta-rs's default size
    assert set(sizes.values()) == {str(REWRITTEN_FILE_BYTES)}, sizes
    assert lake.file_target("steps") == REWRITTEN_FILE_BYTES
    # a table made by an older trajlake gets the size on the next ensure(); one set by hand stays
    old = Lake(tmp_path / "old")
    for name, config in (("steps", None), ("failures", {FILE_TARGET_PROPERTY: "1048576"})):
        DeltaTable.create(old.uri(name), schema=TABLES[name], configuration=config)
    old.ensure(["steps", "failures"])
    assert old.table("steps").metadata().configuration[FILE_TARGET_PROPERTY] == str(REWRITTEN_FILE_BYTES)
    assert old.file_target("failures") == 1 << 20
    # two processes upgrading one table at once: the one whose commit loses finds the size set
    DeltaTable.create(old.uri("rewards"), schema=TABLES["rewards"])
    first, second = DeltaTable(old.uri("rewards")), DeltaTable(old.uri("rewards"))
    old._set_file_target("rewards", first)
    old._set_file_target("rewards", second)  # (its snapshot predates the first one's commit)
    assert old.file_target("rewards") == REWRITTEN_FILE_BYTES


def test_a_batch_that_updates_a_few_episodes_rewrites_files_of_bounded_size_not_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch adds new episodes and updates the last few of the batch before (an episode whose
    events straddle two batches, as in every replay): the rows it copies stay those of a file or two.
    At delta-rs's default file size the newest file took every batch's rows, and each batch copied it
    whole: the table so far."""
    from lake.store import FILE_TARGET_PROPERTY

    lake = Lake(tmp_path / "lake")
    lake.ensure(["failures"])
    target = 32 << 10  # the 16 MiB of a real table, at the scale of a test
    lake.table("failures").alter.set_table_properties({FILE_TARGET_PROPERTY: str(target)})
    monkeypatch.setenv(SCAN_LOG_ENV, str(tmp_path / "scans.jsonl"))
    per_batch, copied = 6000, []
    for b in range(8):
        eps = [episode(b, i) for i in range(per_batch)]
        straddling = [episode(b - 1, i) for i in range(per_batch - 3, per_batch)] if b else []
        rows = [frow(e, "v1") for e in eps + straddling]
        rows = [{**r, "message": f"{r['episode_id']} {i * 7919 % 100_003}"} for i, r in enumerate(rows)]
        lake.write("failures", pa.Table.from_pylist(rows, schema=TABLES["failures"]), mode="replace_episodes",
                   txns={"a": b}, episodes=eps + straddling)  # fmt: skip
        copied += [s["copied"] for s in scans(tmp_path) if s["op"] == "merge"]
    files = pa.table(lake.table("failures").get_add_actions(flatten=True))
    largest = max(files.column("num_records").to_pylist())
    assert len(files) > 8 and largest < per_batch, (len(files), largest)  # batches cut into files
    assert all(c <= 2 * largest for c in copied[1:]), (copied, largest)  # a file or two, not the table
    assert lake.read("failures").num_rows == 8 * per_batch


def test_a_quarantine_merge_prunes_by_offset_though_its_lead_key_has_one_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake(tmp_path / "lake")
    lake.ensure(["quarantine"])

    def bad(offsets: range) -> pa.Table:
        return pa.Table.from_pylist(
            [
                {"topic": "trajlake.events", "partition": o % 2, "offset": o, "error": "not json"}
                for o in offsets
            ],
            schema=TABLES["quarantine"],
        )

    for b in range(N_FILES):  # one file per batch, offsets growing as the log does
        lake.write("quarantine", bad(range(b * 50, b * 50 + 50)), mode="upsert", txns={"p": b})
    monkeypatch.setenv(SCAN_LOG_ENV, str(tmp_path / "scans.jsonl"))
    last = (N_FILES - 1) * 50
    lake.write("quarantine", bad(range(last + 40, last + 60)), mode="upsert", txns={"p": N_FILES})
    merges = [s for s in scans(tmp_path) if s["op"] == "merge"]
    assert len(merges) == 1 and merges[0]["files"] <= 1, merges  # the newest file, not all 24
    assert lake.read("quarantine").num_rows == N_FILES * 50 + 10


def test_the_dedup_lookup_reads_the_id_column_of_the_newest_files(tmp_path: Path, monkeypatch) -> None:
    lake = Lake(tmp_path / "lake")
    lake.ensure()
    batches = []
    for b in range(N_FILES):
        rows = [event_row(parse_event(d), "t", 0, b * 100 + i)
                for i, d in enumerate(model(f"e{b}", s) for s in range(100))]  # fmt: skip
        batches.append(rows)
        lake.write(
            "events", pa.Table.from_pylist(rows, schema=TABLES["events"]), mode="insert_new", txns={"p": b}
        )
    monkeypatch.setenv(SCAN_LOG_ENV, str(tmp_path / "scans.jsonl"))
    newest = [r["event_id"] for r in batches[-1][:60]] + [r["event_id"] for r in batches[-2][:5]]
    found = lake.read_events_by_id(newest + ["no-such-id"])
    assert sorted(found.column("event_id").to_pylist()) == sorted(newest)
    reads = scans(tmp_path)
    assert reads and all(s["op"] == "read" for s in reads)
    assert sum(int(s["files"]) for s in reads) <= 4, reads  # two files, twice (ids, then the rows found)
    # a batch of new ids (none stored): only the id column of at most the newest files
    fresh = [str(parse_event(model("new", s)).event_id) for s in range(200)]
    assert lake.read_events_by_id(fresh).num_rows == 0
    assert sum(int(s["files"]) for s in scans(tmp_path)) <= 1


def test_key_predicates_cut_ranges_at_the_widest_gaps() -> None:
    few = [episode(3, i) for i in range(IN_PRUNE_MAX)]
    assert key_predicate("episode_id", few).startswith("episode_id IN (")
    many = [episode(20, i) for i in range(100)] + [episode(1, 4)]
    where = key_predicate("episode_id", many, alias="t.")
    assert "(t.episode_id = 'ep-0001-004' OR " in where  # the straggler is a range of its own
    ranges = _key_ranges(sorted(many), KEY_RANGES_MAX)
    assert 2 <= len(ranges) <= KEY_RANGES_MAX and ranges[0] == ("ep-0001-004", "ep-0001-004")
    assert [lo for lo, _ in ranges[1:]] == sorted(lo for lo, _ in ranges[1:]) and ranges[1][
        0
    ] == "ep-0020-000"
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # disjoint, in order
    assert ranges[-1][1] == "ep-0020-099"
    assert where.endswith(")") and " AND t.episode_id IN (" in where
    assert "IN (" not in key_predicate("episode_id", many, exact=False)
    assert key_predicate("offset", list(range(50)) + [10_000]).count(" OR ") == 1
    assert key_predicate("episode_id", []) == "FALSE"


@pytest.mark.parametrize("way", ["ranges", "in_lists"])
def test_the_dedup_lookup_finds_exactly_the_stored_ids_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """Ranges read whole and matched in Arrow, or exact IN lists (ranges that would read too much)."""
    import sys

    import lake.store as store

    lake = Lake(tmp_path / "lake")
    lake.ensure()
    stored: list[str] = []
    for b in range(6):
        rows = [event_row(parse_event(d), "t", 0, b * 100 + i)
                for i, d in enumerate(model(f"e{b}", s) for s in range(100))]  # fmt: skip
        stored += [r["event_id"] for r in rows]
        table = pa.Table.from_pylist(rows, schema=TABLES["events"])
        lake.write("events", table, mode="insert_new", txns={"p": b})
    dt = lake.table("events")
    assert store.rows_in_ranges(dt, "event_id", [(min(stored), max(stored))]) == 600
    assert store.rows_in_ranges(dt, "event_id", [(stored[150], stored[160])]) == 100  # one file's rows
    assert store.rows_in_ranges(dt, "event_id", [("~", "~~")]) == 0
    if way == "in_lists":
        monkeypatch.setattr(store, "rows_in_ranges", lambda *a: sys.maxsize)
    fresh = [str(parse_event(model("new", s)).event_id) for s in range(300)]
    found = lake.read_events_by_id(stored[::7] + fresh + stored[-40:])
    assert sorted(found.column("event_id").to_pylist()) == sorted(set(stored[::7] + stored[-40:]))
    assert lake.read_events_by_id(fresh).num_rows == 0


@given(
    st.lists(
        st.text(alphabet="ab\0é", max_size=6) | st.uuids().map(str), min_size=2, max_size=60, unique=True
    )
)
@settings(max_examples=200, deadline=None)
def test_the_gaps_between_keys_are_their_common_prefixes_computed_at_once_or_one_by_one(
    keys: list[str],
) -> None:
    """The vectorised gaps (ASCII keys) are exactly the per-pair ones; other keys take the per-pair way."""
    import os

    from lake.store import _prefix_gaps

    vals = sorted(keys)
    got = _prefix_gaps(vals)
    want = [-float(len(os.path.commonprefix([a, b]))) for a, b in zip(vals, vals[1:], strict=False)]
    assert got is None or got == want
    if all(k.isascii() and "\0" not in k for k in keys):
        assert got == want


@contextmanager
def reading_while(check: Callable[[], str | None], threads: int = 2) -> Iterator[list[str]]:
    """Threads calling ``check`` in a loop while the block runs; what it returned or raised, listed."""
    import threading

    errors: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                if (problem := check()) is not None:
                    errors.append(problem)
            except Exception as exc:  # noqa: BLE001 - a failed read is what the tests look for
                errors.append(repr(exc))

    running = [threading.Thread(target=reader) for _ in range(threads)]
    for t in running:
        t.start()
    try:
        yield errors
    finally:
        stop.set()
        for t in running:
            t.join()


def test_compaction_between_writes_while_readers_read(lake: Lake, tmp_path: Path) -> None:
    """delta-rs compacts the small files while readers read the latest and a pinned version."""
    pinned = lake.table("failures").version()
    want = lake.read("failures").num_rows
    assert len(lake.table("failures").file_uris()) == N_FILES

    def check() -> str | None:
        n_now, n_then = lake.read("failures").num_rows, lake.read("failures", version=pinned).num_rows
        if n_then != want or n_now < want:
            return f"read {n_now} / pinned {n_then} rows, expected {want}"
        return None

    with reading_while(check) as errors:
        assert lake.compact("failures", min_files=N_FILES + 1) is None  # not due yet: nothing happens
        metrics = lake.compact("failures", min_files=8)
        extra = pa.Table.from_pylist([frow(episode(99, 0), "v1")], schema=TABLES["failures"])
        lake.write("failures", extra, mode="upsert", txns={"a": 200})  # a writer after it goes on
    assert not errors, errors[:3]
    assert metrics is not None and metrics["numFilesRemoved"] == N_FILES and metrics["numFilesAdded"] == 1
    assert len(lake.table("failures").file_uris()) == 2
    assert lake.read("failures").num_rows == want + 1
    assert lake.read("failures", version=pinned).num_rows == want  # not vacuumed: old versions still read
    assert lake.txn_version("failures", "a") == 200
    # the compacted file keeps the keys' ranges in commit order: a merge of new episodes skips it
    new = pa.Table.from_pylist([frow(episode(150, 1), "v1")], schema=TABLES["failures"])
    lake.write("failures", new, mode="replace_episodes", txns={"a": 201}, episodes=[episode(150, 1)])
    merges = [s for s in scans(tmp_path) if s["op"] == "merge"]
    assert merges[-1]["files"] == 0, merges


BIG_BATCH = """
import sys
import pyarrow as pa
from lake import Lake
from schemas import TABLES
sys.path.insert(0, sys.argv[2])
from tests.pipelines.test_lake_pruning import frow
lake = Lake(sys.argv[1])
lake.ensure()
eps = [f"0190{i:08x}-7000-8000-{i:012x}" for i in range(30_000)]
lake.write("failures", pa.Table.from_pylist([frow(e, "v1") for e in eps], schema=TABLES["failures"]),
           mode="upsert", txns={"p": 0})
rows = [frow(e, v) for e in eps[1:] for v in ("v1", "v2")]  # a re-judge of every episode; one emptied
lake.write("failures", pa.Table.from_pylist(rows, schema=TABLES["failures"]), mode="replace_episodes",
           episodes=eps, txns={"p": 1})
assert lake.row_count("failures") == len(rows)
assert lake.read_events_by_id(eps).num_rows == 0 and lake.read_episodes_events(eps).num_rows == 0
print("ok")
"""


def test_a_batch_touching_thirty_thousand_episodes_commits(tmp_path: Path) -> None:
    """An IN list of ~25k values overflows DataFusion's SQL stack (a segfault, no retry can catch):
    reads of many keys go in bounded chunks. Run apart, so a crash fails this test, not the session."""
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", BIG_BATCH, str(tmp_path / "lake"), root],
                          capture_output=True, text=True, timeout=600, cwd=root)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (proc.returncode, proc.stderr[-2000:])


def checkpoint_row(ck: str, versions: dict[str, int]) -> dict[str, object]:
    import datetime as dt

    return {"checkpoint_id": ck, "parent_id": None, "policy_id": "p", "policy_version": "1",
            "backend": "torch", "path": f"/ck/{ck}", "created_at": dt.datetime(2026, 12, 4, tzinfo=dt.UTC),
            "lake_uri": "elsewhere", "table_versions": json.dumps(versions), "judge_name": None,
            "judge_version": None, "offsets": None, "num_samples": 1, "metrics": None}  # fmt: skip


def test_vacuum_deletes_what_compaction_left_but_keeps_pinned_versions_while_readers_read(
    lake: Lake, tmp_path: Path
) -> None:
    """delta-rs's VACUUM after a compaction: the files only old versions read go, except a checkpoint's."""

    from lake.errors import LakeError

    table = Path(lake.uri("failures"))
    pinned, unpinned = 10, 5  # versions 0..N_FILES: one file added per version
    files_at = {
        v: {Path(u).name for u in lake.table("failures", version=v).file_uris()} for v in (pinned, unpinned)
    }
    lake.write("checkpoints", pa.Table.from_pylist([checkpoint_row("ck-1", {"failures": pinned, "steps": 3})],
               schema=TABLES["checkpoints"]), mode="upsert")  # fmt: skip
    unusable = [checkpoint_row("ck-2", {"failures": "x"}), checkpoint_row("ck-3", {"failures": 2**70})]
    unusable.append({**checkpoint_row("ck-4", {}), "table_versions": "[" * 100_000})  # (json recurses)
    lake.write("checkpoints", pa.Table.from_pylist(unusable, schema=TABLES["checkpoints"]), mode="upsert")
    # a lineage of another lake with a table of this name: a version this table does not have yet
    other = pa.Table.from_pylist([checkpoint_row("ck-5", {"failures": 999})], schema=TABLES["checkpoints"])
    lake.write("checkpoints", other, mode="upsert")
    assert lake.pinned_versions("failures") == [pinned, 999] and lake.pinned_versions("episodes") == []
    want, then = lake.read("failures").num_rows, lake.read("failures", version=pinned).num_rows
    assert then == 60 * pinned  # (version 0 is the empty table)
    assert lake.compact("failures", min_files=8) is not None
    latest = {Path(u).name for u in lake.table("failures").file_uris()}
    assert lake.vacuum("failures") == []  # Delta's week: nothing is old enough yet
    with pytest.raises(LakeError, match="under Delta's safety bound"):
        lake.vacuum("failures", retain_hours=0)
    dry = lake.vacuum("failures", retain_hours=0, allow_short_retention=True, dry_run=True)
    on_disk = {p.name for p in table.glob("*.parquet")}
    assert {Path(f).name for f in dry} == on_disk - latest - files_at[pinned]

    def check() -> str | None:
        if lake.read("failures").num_rows != want or lake.read("failures", version=pinned).num_rows != then:
            return "a read lost rows"
        return None

    with reading_while(check) as errors:
        gone = lake.vacuum("failures", retain_hours=0, allow_short_retention=True)
    assert not errors, errors[:3]
    assert sorted(gone) == sorted(dry) and len(gone) == N_FILES - pinned  # version 10 reads 10 files
    left = {p.name for p in table.glob("*.parquet")}
    assert left == latest | files_at[pinned] and not files_at[unpinned] <= left - files_at[pinned]
    assert lake.read("failures").num_rows == want and lake.read("failures", version=pinned).num_rows == then
    assert lake.vacuum("failures", retain_hours=0, allow_short_retention=True) == []  # nothing left to do


def test_lake_maintain_vacuums_with_delta_rs_keeping_pinned_versions(lake: Lake) -> None:
    """`trajlake lake maintain` (Spark's OPTIMIZE) vacuums with delta-rs: Spark's VACUUM cannot keep the
    files of the versions learner checkpoints trained on."""
    from lake.errors import LakeError
    from pipelines.spark_lake import SparkLake

    pinned = 10
    lake.write("checkpoints", pa.Table.from_pylist([checkpoint_row("ck-1", {"failures": pinned})],
               schema=TABLES["checkpoints"]), mode="upsert")  # fmt: skip
    assert lake.compact("failures", min_files=8) is not None
    sl = SparkLake(lake.root)
    with pytest.raises(LakeError, match="under Delta's safety bound"):
        sl.vacuum("failures", retain_hours=0)
    assert sl.vacuum("failures", retain_hours=0, allow_short_retention=True) == N_FILES - pinned
    assert sl._spark is None  # (no JVM was started for it)
    assert lake.read("failures", version=pinned).num_rows == 60 * pinned
    assert lake.read("failures").num_rows == 60 * N_FILES


def test_vacuum_finds_removed_files_a_checkpoint_no_longer_names(lake: Lake) -> None:
    """A checkpoint drops a file's ``remove`` once it is as old as the retention: the VACUUM still finds it.

    (delta-rs's lite mode reads the removes in the log: such files would stay on disk forever.)
    """
    import time

    dt = lake.table("failures")
    dt.alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 1 seconds"})
    assert lake.compact("failures", min_files=8) is not None
    time.sleep(1.5)
    lake.table("failures").create_checkpoint()  # (the removes, older than a second, are left out)
    table = Path(lake.uri("failures"))
    latest = {Path(u).name for u in lake.table("failures").file_uris()}
    assert len(list(table.glob("*.parquet"))) == N_FILES + 1
    gone = lake.vacuum("failures", retain_hours=0, allow_short_retention=True)
    assert len(gone) == N_FILES and {p.name for p in table.glob("*.parquet")} == latest


def test_the_pipeline_vacuums_each_table_once_a_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelines import log_pipeline
    from pipelines.log_pipeline import PipelineConfig, maintain_between_batches

    cfg = PipelineConfig(bootstrap="unused:9092", lake_root=str(tmp_path / "lake"), vacuum_every_s=3600)
    lake = cfg.lake()
    lake.ensure()
    calls: list[tuple[str, float]] = []
    monkeypatch.setattr(log_pipeline, "_VACUUMED", {})
    monkeypatch.setattr(
        type(lake), "vacuum", lambda self, name, *, retain_hours: calls.append((name, retain_hours)) or ["f"]
    )
    assert maintain_between_batches(lake, cfg)["vacuumed"] == dict.fromkeys(log_pipeline.PIPELINE_TABLES, 1)
    assert sorted(calls) == sorted((t, 168.0) for t in log_pipeline.PIPELINE_TABLES)
    assert maintain_between_batches(lake, cfg)["vacuumed"] == {}  # not due again yet
    n = len(log_pipeline.PIPELINE_TABLES)
    assert len(calls) == n

    # a vacuum that fails (whatever it raises) is logged; the next table goes on, and it is tried
    # again a period later, not after every batch
    def broken(self: Lake, name: str, *, retain_hours: float) -> list[str]:
        calls.append((name, retain_hours))
        raise RecursionError()  # (no message: the log line names its type)

    monkeypatch.setattr(type(lake), "vacuum", broken)
    monkeypatch.setattr(log_pipeline, "_VACUUMED", {})
    assert maintain_between_batches(lake, cfg)["vacuumed"] == {} and len(calls) == 2 * n
    assert maintain_between_batches(lake, cfg)["vacuumed"] == {} and len(calls) == 2 * n
    off = PipelineConfig(bootstrap="unused:9092", lake_root=cfg.lake_root, vacuum_every_s=0)
    monkeypatch.setattr(log_pipeline, "_VACUUMED", {})
    assert maintain_between_batches(lake, off)["vacuumed"] == {} and len(calls) == 2 * n


def test_the_pipeline_checkpoints_a_table_every_few_commits_while_readers_read(
    lake: Lake, tmp_path: Path
) -> None:

    from pipelines.log_pipeline import PipelineConfig, maintain_between_batches

    cfg = PipelineConfig(bootstrap="unused:9092", lake_root=lake.root, checkpoint_every=10, vacuum_every_s=0)
    log_dir = Path(lake.uri("failures")) / "_delta_log"
    assert lake.table("failures").version() == N_FILES and not list(log_dir.glob("*.checkpoint.parquet"))
    want = lake.read("failures").num_rows

    def check() -> str | None:
        return "a read lost rows" if Lake(lake.root).read("failures").num_rows != want else None

    with reading_while(check, threads=1) as errors:
        done = maintain_between_batches(lake, cfg)
    assert not errors, errors[:3]
    assert "failures" in done["checkpointed"] and (log_dir / f"{N_FILES:020d}.checkpoint.parquet").exists()
    assert "failures" not in maintain_between_batches(lake, cfg)["checkpointed"]  # not due again yet
    assert lake.read("failures").num_rows == want and lake.table("failures").version() == N_FILES


def _age_log(table: str, days: float) -> None:
    """Make every file of the table's log look ``days`` old (as after a month of batches)."""
    import os
    import time

    then = time.time() - days * 86400
    for p in (Path(table) / "_delta_log").iterdir():
        os.utime(p, (then, then))


def test_no_writer_cleans_the_log_on_its_own(tmp_path: Path) -> None:
    """delta-rs deletes the log below its newest expired checkpoint at each checkpoint it writes,
    unless the table says not to: a version a learner checkpoint names would stop loading."""
    from deltalake import DeltaTable, write_deltalake

    rows = pa.Table.from_pylist([frow("ep-1", "v1")], schema=TABLES["failures"])
    lk = Lake(tmp_path / "lake")
    lk.ensure(["failures"])
    plain = str(tmp_path / "plain")  # the same table made without the property: the control
    DeltaTable.create(plain, schema=TABLES["failures"])
    every = {"delta.checkpointInterval": "10"}  # (delta-rs's own checkpoints every 10 commits, not 100)
    for uri in (lk.uri("failures"), plain):
        DeltaTable(uri).alter.set_table_properties(every)
        for _ in range(15):
            write_deltalake(uri, rows, mode="append")
        _age_log(uri, 40)  # a checkpoint and the commits before it are past Delta's 30 days
        for _ in range(10):  # delta-rs's next checkpoint, and its cleanup where allowed
            write_deltalake(uri, rows, mode="append")
    assert not (Path(plain) / "_delta_log" / f"{1:020d}.json").exists()  # the control: cleaned
    assert (Path(lk.uri("failures")) / "_delta_log" / f"{1:020d}.json").exists()
    assert DeltaTable(lk.uri("failures"), version=3).to_pyarrow_table().num_rows == 2
    with pytest.raises(Exception):  # noqa: B017,PT011 - delta-rs's own error: the version is gone
        DeltaTable(plain, version=3)


def test_log_cleanup_keeps_what_pinned_versions_load_from(lake: Lake) -> None:
    """Expired commits go, a prefix of the log at a time, but never those a checkpoint's version needs."""
    from deltalake import DeltaTable

    log_dir = Path(lake.uri("failures")) / "_delta_log"
    for v in (8, 16):  # checkpoints at 8 and 16 (of versions 0..24)
        DeltaTable(lake.uri("failures"), version=v).create_checkpoint()
    assert lake.cleanup_log("failures") == []  # nothing is a month old
    _age_log(lake.uri("failures"), 40)
    lake.write("checkpoints", pa.Table.from_pylist([checkpoint_row("ck-1", {"failures": 12})],
               schema=TABLES["checkpoints"]), mode="upsert")  # fmt: skip
    rows_at_12 = lake.read("failures", version=12).num_rows
    gone = lake.cleanup_log("failures")  # version 12 loads from the checkpoint at 8: 8.. stay
    assert gone and all(int(n[:20]) < 8 for n in gone) and (log_dir / f"{8:020d}.checkpoint.parquet").exists()
    assert {int(n[:20]) for n in gone} == set(range(8))
    assert DeltaTable(lake.uri("failures"), version=12).to_pyarrow_table().num_rows == rows_at_12 == 60 * 12
    assert lake.read("failures").num_rows == 60 * N_FILES
    assert lake.cleanup_log("failures") == []
    # without the pin (the checkpoint row replaced by one naming the latest version), 8..15 go too
    lake.write("checkpoints", pa.Table.from_pylist([checkpoint_row("ck-1", {"failures": N_FILES})],
               schema=TABLES["checkpoints"]), mode="upsert")  # fmt: skip
    gone = lake.cleanup_log("failures")
    assert {int(n[:20]) for n in gone} == set(range(8, 16))
    assert lake.read("failures").num_rows == 60 * N_FILES
    with pytest.raises(Exception):  # noqa: B017,PT011 - delta-rs's own error: the version is gone
        DeltaTable(lake.uri("failures"), version=12)


def test_log_cleanup_turns_the_writers_cleanup_off_on_an_older_table(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    lk = Lake(tmp_path / "lake")
    DeltaTable.create(lk.uri("failures"), schema=TABLES["failures"])  # made by an older trajlake
    assert "delta.enableExpiredLogCleanup" not in lk.table("failures").metadata().configuration
    assert lk.cleanup_log("failures") == []
    assert lk.table("failures").metadata().configuration["delta.enableExpiredLogCleanup"] == "false"


def test_the_pipeline_cleans_the_log_at_the_checkpoints_it_writes(lake: Lake) -> None:
    from pipelines.log_pipeline import PipelineConfig, maintain_between_batches

    cfg = PipelineConfig(bootstrap="unused:9092", lake_root=lake.root, checkpoint_every=10, vacuum_every_s=0)
    _age_log(lake.uri("failures"), 40)
    rows = lake.read("failures").num_rows
    done = maintain_between_batches(lake, cfg)
    assert "failures" in done["checkpointed"] and done["logs_cleaned"]["failures"] >= N_FILES
    assert (
        lake.read("failures").num_rows == rows and maintain_between_batches(lake, cfg)["logs_cleaned"] == {}
    )
