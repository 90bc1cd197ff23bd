"""delta-spark and delta-rs on the same tables: Spark reads what the pipeline writes, and
maintenance by Spark leaves the pipeline's exactly-once commits intact.

A real broker, the real Beam pipeline writing with delta-rs in many small
micro-batches, and a real Spark session with the Delta jars from Maven Central.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake, LakeError
from pipelines import PipelineConfig, run_once
from pipelines.spark_lake import SparkLake
from schemas.tables import PRIMARY_KEYS, TABLES
from tests.conftest import free_port
from tests.pipelines.log_workload import Workload, make_workload, produce
from tests.pipelines.test_log_pipeline import check

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def folded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EmbeddedKafka, PipelineConfig, Workload]]:
    """Phase 1 of a messy workload (duplicates, malformed, late, re-judged), folded in small batches.

    One broker, lake and Spark session for the module: the first test only reads.
    """
    home = tmp_path_factory.mktemp("spark-lake")
    broker = EmbeddedKafka(home / "home", f"127.0.0.1:{free_port()}", heap="384m")
    broker.start()
    try:
        wl = make_workload(n_episodes=40, steps_per_episode=6)
        cfg = PipelineConfig(
            bootstrap=broker.bootstrap, lake_root=str(home / "lake"), max_batch_per_partition=40
        )
        produce(broker.bootstrap, wl.phase1)
        run_once(cfg)
        yield broker, cfg, wl
    finally:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
        broker.stop(timeout_s=20)


def _canonical(table: pa.Table, name: str) -> pa.Table:
    schema = TABLES[name]
    t = table.select(schema.names).cast(schema)
    return t.sort_by([(k, "ascending") for k in PRIMARY_KEYS[name]])


def _rows_by_spark(sl: SparkLake, name: str) -> pa.Table:
    return _canonical(sl.read(name).toArrow(), name)


def _rows_by_delta_rs(lake: Lake, name: str) -> pa.Table:
    return _canonical(lake.read(name), name)


def test_spark_reads_every_table_the_pipeline_writes_and_agrees_with_delta_rs(
    folded: tuple[EmbeddedKafka, PipelineConfig, Workload],
) -> None:
    _, cfg, _ = folded
    lake = Lake(cfg.lake_root)
    sl = SparkLake(cfg.lake_root)
    names = [n for n in TABLES if lake.exists(n)]
    assert {"events", "quarantine", "episodes", "steps", "rewards", "failures"} <= set(names)
    for name in names:
        by_spark, by_rs = _rows_by_spark(sl, name), _rows_by_delta_rs(lake, name)
        assert by_spark.num_rows == by_rs.num_rows, name
        assert by_spark.equals(by_rs), f"{name}: Spark and delta-rs read different rows"
    # SQL over the tables gives what delta-rs computes
    got = {
        r["status"]: r["n"]
        for r in sl.sql("SELECT status, count(*) AS n FROM episodes GROUP BY status").collect()
    }
    want: dict[str | None, int] = {}
    for r in lake.read("episodes").to_pylist():
        want[r["status"]] = want.get(r["status"], 0) + 1
    assert got == want
    # time travel agrees too
    first = DeltaTable(lake.uri("events")).history()[-1]["version"] + 1
    assert sl.read("events", version=first).count() == lake.read("events", version=first).num_rows
    with pytest.raises(LakeError, match="unknown table"):
        sl.read("nope")


def test_spark_maintenance_compacts_and_the_pipeline_goes_on_exactly_once(
    folded: tuple[EmbeddedKafka, PipelineConfig, Workload],
) -> None:
    broker, cfg, wl = folded
    lake = Lake(cfg.lake_root)
    rows_before = {n: _rows_by_delta_rs(lake, n) for n in ("events", "steps", "episodes")}
    files_before = {n: len(lake.table(n).file_uris()) for n in ("events", "steps")}
    apps = {a for a in _app_ids(lake)}
    txns_before = {a: lake.table("events").transaction_version(a) for a in apps}
    assert files_before["events"] > 4  # micro-batches left many small files

    sl = SparkLake(cfg.lake_root)
    with pytest.raises(LakeError, match="under Delta's safety bound"):
        sl.vacuum("events", retain_hours=0)  # a short retention must be asked for explicitly
    results = {r.table: r for r in sl.maintain(retain_hours=0, allow_short_retention=True)}
    events = results["events"]  # append-only: one small file per micro-batch and day
    assert events.files_after < events.files_before and events.zorder_by == ("episode_id",)
    assert events.vacuumed_files >= events.files_before  # the rewritten files are gone from disk
    for name in ("events", "steps"):
        assert len(lake.table(name).file_uris()) == results[name].files_after  # delta-rs sees the result
    for name, before in rows_before.items():
        assert _rows_by_delta_rs(lake, name).equals(before), f"maintenance changed the rows of {name}"
    assert {a: lake.table("events").transaction_version(a) for a in apps} == txns_before

    # The pipeline resumes where it was: phase 2 (late events, late re-judgements) lands exactly once.
    produce(broker.bootstrap, wl.phase2)
    run_once(cfg)
    check(lake, wl.truth)
    versions = lake.versions()
    assert run_once(cfg) == [] and lake.versions() == versions


def _app_ids(lake: Lake) -> set[str]:
    import json

    out = set()
    for f in sorted((Path(lake.uri("events")) / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            if "txn" in d:
                out.add(d["txn"]["appId"])
    assert out
    return out


def test_spark_optimize_bins_to_the_tables_file_size(tmp_path: Path) -> None:
    """delta-spark has no ``delta.targetFileSize``: left at its 1 GiB bins, OPTIMIZE would make one
    file of the table that the next MERGE touching it copies whole."""
    from lake.store import FILE_TARGET_PROPERTY
    from tests.pipelines.test_lake_pruning import episode, frow

    lake = Lake(tmp_path / "lake")
    lake.ensure(["failures"])
    for b in range(12):  # twelve small files
        rows = [{**frow(episode(b, i), "v1"), "message": f"{b}-{i}-" + "m" * (i % 50)} for i in range(300)]
        lake.write("failures", pa.Table.from_pylist(rows, schema=TABLES["failures"]), mode="upsert",
                   txns={"a": b})  # fmt: skip
    sizes = pa.table(lake.table("failures").get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    target = 3 * max(sizes)  # room for about three of them a file
    lake.table("failures").alter.set_table_properties({FILE_TARGET_PROPERTY: str(target)})
    metrics = SparkLake(str(tmp_path / "lake")).optimize("failures")
    assert metrics["numFilesRemoved"] == 12 and metrics["numFilesAdded"] >= 3, metrics
    assert lake.read("failures").num_rows == 12 * 300
