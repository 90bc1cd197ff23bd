"""The lake and the blob store on S3 (s3proxy, a real S3 server, started here), and two writers on one lake.

Every table the pipeline writes to an S3 prefix equals the one it writes to a local
directory from the same log; two pipelines started together on one lake, local or S3,
leave no event twice and the tables one pipeline would have written; the Dask runner
writes the S3 lake too; blobs round-trip through fsspec's S3 filesystem.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake, diff_lakes
from lake.s3proxy import S3Proxy
from pipelines import PipelineConfig, run_once
from schemas.tables import PRIMARY_KEYS
from tests.pipelines.log_workload import make_workload, produce

pytestmark = pytest.mark.kafka

WRITER = """
import json, sys
from pipelines import PipelineConfig, run_once
run_once(PipelineConfig(bootstrap=sys.argv[1], lake_root=sys.argv[2], lake_options=json.loads(sys.argv[3]),
                        max_batch_per_partition=40, runner=sys.argv[4]))
"""


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Proxy]:
    with S3Proxy(tmp_path_factory.mktemp("s3")) as server:
        yield server


def _same(a: Lake, b: Lake) -> None:
    diffs = diff_lakes(a, b)
    assert all(d.equal for d in diffs), [d for d in diffs if not d.equal]


def _together(bootstrap: str, root: str, options: dict[str, str], runner: str = "local") -> None:
    """Two pipeline processes started at once on one lake, small batches so their commits interleave.

    On Dask each starts its own cluster of two worker processes, as two deployments would.
    """
    import json

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, bootstrap, root, json.dumps(options), runner],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=900)
        assert p.returncode == 0, out[-3000:]


@pytest.mark.timeout(1200)  # six pipeline runs, three of them on S3 (s3proxy), in small batches
def test_an_s3_lake_equals_a_local_one_and_two_writers_lose_and_duplicate_nothing(
    fresh_broker: EmbeddedKafka, s3: S3Proxy, tmp_path: Path
) -> None:
    fresh_broker.start()
    wl = make_workload(n_episodes=16, seed=21, steps_per_episode=4)
    produce(fresh_broker.bootstrap, wl.phase1 + wl.phase2)
    bucket = s3.bucket("lakes")
    opts = s3.storage_options()
    local = PipelineConfig(bootstrap=fresh_broker.bootstrap, lake_root=str(tmp_path / "local"))
    run_once(local)

    # one pipeline on S3: the same tables as on a local directory (and its staging area is gone)
    one = PipelineConfig(bootstrap=fresh_broker.bootstrap, lake_root=f"{bucket}/one", lake_options=opts)
    run_once(one)
    _same(local.lake(), one.lake())
    assert not (s3.data / "lakes" / "one" / "_staging").exists() or not any(
        (s3.data / "lakes" / "one" / "_staging").iterdir()
    )

    # two pipelines together, on a local lake with the local runner and on an S3 lake with Dask
    # (whose workers stage and commit through S3: the Dask runner writes the S3 lake too)
    for root, options, runner in (
        (str(tmp_path / "two"), {}, "local"),
        (f"{bucket}/two-dask", opts, "dask"),
    ):
        _together(fresh_broker.bootstrap, root, options, runner)
        lake = Lake(root, options or None)
        ids = Counter(lake.read("events").column("event_id").to_pylist())
        assert ids and max(ids.values()) == 1, "an event_id twice"
        assert set(ids) == wl.truth.event_ids, "events lost"
        _same(local.lake(), lake)

    # a learner reads its samples from the S3 lake at one consistent snapshot
    from learners.dataset import DatasetSpec, load_samples

    on_s3 = load_samples(DatasetSpec(lake=one.lake_root, judge_name="tests", storage_options=opts))
    here = load_samples(DatasetSpec(lake=local.lake_root, judge_name="tests"))
    assert on_s3.table.equals(here.table) and on_s3.skipped == here.skipped and sum(here.skipped.values()) > 0


def test_blobs_round_trip_through_s3(s3: S3Proxy) -> None:
    from ingest.blobs import BlobStore

    bucket = s3.bucket("blobs")
    store = BlobStore(f"{bucket}/store", **s3.fsspec_options())
    data = os.urandom(3 << 20)  # several MiB: a multipart upload
    ref = store.put(data)
    assert store.get(ref.sha256) == data and store.exists(ref.sha256)
    again = BlobStore(f"{bucket}/store", **s3.fsspec_options())
    assert again.put(data).sha256 == ref.sha256 and again.get(ref.sha256) == data  # content-addressed


def test_vacuum_on_s3_deletes_compacted_files_once_and_then_commits_nothing(s3: S3Proxy) -> None:
    """delta-rs lists a deleted file again until its tombstone expires: only files still in the bucket
    count, so a second VACUUM finds nothing and commits nothing (no START/END pair every period)."""
    import pyarrow as pa

    from schemas.tables import TABLES
    from tests.pipelines.test_lake_pruning import frow

    lake = Lake(f"{s3.bucket('vacuum')}/lake", s3.storage_options())
    lake.ensure(["failures"])
    for b in range(4):
        rows = pa.Table.from_pylist([frow(f"ep-{b}-{i}", "v1") for i in range(5)], schema=TABLES["failures"])
        lake.write("failures", rows, mode="upsert", txns={"a": b})
    assert lake.compact("failures", min_files=2) is not None
    gone = lake.vacuum("failures", retain_hours=0, allow_short_retention=True)
    assert len(gone) == 4 and not any((s3.data / "vacuum" / "lake" / "failures" / f).exists() for f in gone)
    version = lake.table("failures").version()
    assert lake.vacuum("failures", retain_hours=0, allow_short_retention=True) == []
    assert lake.table("failures").version() == version and lake.read("failures").num_rows == 20


SPARK_ON_S3 = """
import json, sys
from pipelines.spark_lake import SparkLake
root, options = sys.argv[1], json.loads(sys.argv[2])
with SparkLake(root, storage_options=options) as sl:
    counts = {t: sl.sql(f"SELECT count(*) AS n FROM delta.`{sl.path(t)}`").collect()[0]["n"]
              for t in ("events", "episodes", "steps")}
    done = sl.maintain(["events"], vacuum=False)
print(json.dumps({"counts": counts, "files": [done[0].files_before, done[0].files_after]}))
"""


def test_spark_queries_and_compacts_an_s3_lake_that_delta_rs_still_reads(
    fresh_broker: EmbeddedKafka, s3: S3Proxy
) -> None:
    """Spark (through Hadoop's S3A) reads the tables the pipeline wrote to S3 and compacts one of them,
    under the same commit lock as the pipeline; delta-rs then reads the same rows."""
    import json

    fresh_broker.start()
    wl = make_workload(n_episodes=30, seed=5, steps_per_episode=3)
    produce(fresh_broker.bootstrap, wl.phase1)
    opts = s3.storage_options()
    cfg = PipelineConfig(bootstrap=fresh_broker.bootstrap, lake_root=f"{s3.bucket('spark')}/lake",
                         lake_options=opts, max_batch_per_partition=60)  # fmt: skip
    run_once(cfg)
    lake = cfg.lake()
    before = {t: lake.read(t) for t in ("events", "episodes", "steps")}
    out = subprocess.run(
        [sys.executable, "-c", SPARK_ON_S3, cfg.lake_root, json.dumps(opts)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["counts"] == {t: before[t].num_rows for t in before}
    assert got["files"][1] < got["files"][0], got["files"]  # micro-batches compacted
    after = Lake(cfg.lake_root, opts)
    for name, rows in before.items():
        key = [(k, "ascending") for k in PRIMARY_KEYS[name]]
        assert after.read(name).sort_by(key).equals(rows.sort_by(key)), name
