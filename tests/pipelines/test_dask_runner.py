"""The same Beam graph on a distributed engine: Beam's DaskRunner on a dask.distributed cluster.

A real scheduler and two worker processes (started by the pipeline for the run, or by the
test and given by address); the lakes they build from one log equal the local runner's,
quarantine, re-judge rewards and late events included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake, diff_lakes
from pipelines import PipelineConfig, run_once
from tests.pipelines.log_workload import make_workload, produce

pytestmark = pytest.mark.kafka


def _equal(a: str, b: str) -> None:
    diffs = diff_lakes(Lake(a), Lake(b))
    assert all(d.equal for d in diffs), [d for d in diffs if not d.equal]


@pytest.mark.timeout(900)  # five runs on Dask, each starting its cluster
def test_the_dask_runner_builds_the_lake_the_local_runner_builds(
    fresh_broker: EmbeddedKafka, tmp_path: Path
) -> None:
    import distributed

    fresh_broker.start()
    wl = make_workload(n_episodes=60, seed=11, steps_per_episode=4)
    local = PipelineConfig(bootstrap=fresh_broker.bootstrap, lake_root=str(tmp_path / "local"))
    dask = PipelineConfig(bootstrap=fresh_broker.bootstrap, lake_root=str(tmp_path / "dask"), runner="dask")
    produce(fresh_broker.bootstrap, wl.phase1)
    run_once(local)
    run_once(dask)  # a local cluster of two worker processes, started for the run and stopped after it
    _equal(local.lake_root, dask.lake_root)
    assert Lake(dask.lake_root).read("quarantine").num_rows == wl.truth_after_1.malformed
    # late events and late re-judgements; this time on a cluster the caller runs, given by address
    produce(fresh_broker.bootstrap, wl.phase2)
    run_once(local)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        with distributed.Client(c.scheduler_address) as client:
            assert len(client.scheduler_info()["workers"]) == 2
        run_once(PipelineConfig(**{**dask.__dict__, "dask_scheduler": c.scheduler_address}))
    _equal(local.lake_root, dask.lake_root)
    rewards = Lake(dask.lake_root).read("rewards")
    assert set(rewards.column("judge_version").to_pylist()) == {"v1", "v2"}  # the re-judge's rewards too
    assert Lake(dask.lake_root).read("samples").num_rows == wl.truth.samples

    # from the command line, as a user runs it: `--runner dask`, then `lake diff` calls them identical
    cli = Path(sys.executable).with_name("trajlake")
    env = {
        **os.environ,
        "TRAJLAKE_HOME": str(tmp_path / "home"),
        "TRAJLAKE_KAFKA_BOOTSTRAP": fresh_broker.bootstrap,
    }
    run = subprocess.run(
        [str(cli), "pipeline", "run", "--once", "--runner", "dask", "--lake", str(tmp_path / "cli")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    diff = subprocess.run(
        [str(cli), "lake", "diff", local.lake_root, str(tmp_path / "cli")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert diff.returncode == 0, diff.stdout + diff.stderr
    bad = subprocess.run(
        [str(cli), "pipeline", "run", "--once", "--scheduler", "tcp://127.0.0.1:1", "--lake", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and "--runner dask" in bad.stderr and "Traceback" not in bad.stderr
    gone = subprocess.run(
        [str(cli), "pipeline", "run", "--once", "--runner", "dask", "--scheduler", "tcp://127.0.0.1:1",
         "--lake", str(tmp_path / "x")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert gone.returncode != 0 and "no Dask scheduler answers" in " ".join(gone.stderr.split())
    assert "Traceback" not in gone.stderr


def test_a_shuffle_on_dask_is_no_wider_than_the_cluster() -> None:
    """Chained joins (each commit waits for the one before) keep the Dask graph narrow.

    Beam's own translation keeps a ``GroupByKey``'s input partitions, and a ``Flatten``
    sums its inputs', so a chain of ``CoGroupByKey``s widens at every link: the log
    pipeline's graph of 200 events had 169,024 tasks.
    """
    import apache_beam as beam
    from apache_beam.runners.dask.dask_runner import DaskRunner
    from apache_beam.runners.dask.overrides import dask_overrides

    from pipelines.dask_runner import WIDTH_KEY, _Visitor

    def chain(p: beam.Pipeline) -> None:
        prev = p | "Start" >> beam.Create([(i % 7, i) for i in range(64)])
        for i in range(6):
            side = p | f"Side{i}" >> beam.Create([(k, -k) for k in range(7)])
            prev = (
                {"a": prev, "b": side}
                | f"Join{i}" >> beam.CoGroupByKey()
                | f"Again{i}" >> beam.FlatMap(lambda kv: [(kv[0], x) for x in kv[1]["a"]])
            )

    def widest(visitor: object, p: beam.Pipeline) -> tuple[int, int]:
        p.replace_all(dask_overrides())
        p.visit(visitor)
        bags = list(visitor.bags.values())  # type: ignore[attr-defined]
        return max(b.npartitions for b in bags), len(bags[-1].__dask_graph__())

    ours, theirs = beam.Pipeline(), beam.Pipeline()
    chain(ours)
    chain(theirs)
    width, tasks = widest(_Visitor({"partition_size": 1, WIDTH_KEY: 2}), ours)
    stock_width, stock_tasks = widest(DaskRunner.to_dask_bag_visitor({"partition_size": 1}), theirs)
    # the widest is the first join's input (64 + 7 partitions of one element); after it, 2 + 7
    assert width == 64 + 7, width
    # what it replaces: each link adds its inputs' partitions
    assert stock_width >= 64 + 6 * 7, stock_width
    assert tasks * 5 < stock_tasks, (tasks, stock_tasks)


def test_keys_equal_in_python_but_of_other_types_stay_apart_on_dask() -> None:
    """Beam groups by a key's encoding: 1, 1.0 and True are three keys (a dict would merge them)."""
    import apache_beam as beam
    from apache_beam.runners.dask.overrides import dask_overrides

    from pipelines.dask_runner import WIDTH_KEY, _Visitor

    p = beam.Pipeline()
    _ = (
        p
        | beam.Create([(1, "int"), (1.0, "float"), (True, "bool"), (1, "int again")])
        | beam.GroupByKey()
        | beam.MapTuple(lambda k, vs: (type(k).__name__, sorted(vs)))
    )
    p.replace_all(dask_overrides())
    visitor = _Visitor({"partition_size": 1, WIDTH_KEY: 1})  # one partition: every key meets
    p.visit(visitor)
    got = list(visitor.bags.values())[-1].compute(scheduler="sync")
    assert sorted(got) == [("bool", ["bool"]), ("float", ["float"]), ("int", ["int", "int again"])]
