"""The log pipeline end to end on a real broker and real Delta tables."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake, diff_lakes
from lake.store import PIPELINE_TABLES
from pipelines import PipelineConfig, backlog, replay, run_once
from pipelines.eager_workers import shared_pool
from tests.pipelines.log_workload import Truth, make_workload, produce

pytestmark = pytest.mark.kafka


def check(lake: Lake, truth: Truth) -> None:
    events = lake.read("events").to_pylist()
    ids = [r["event_id"] for r in events]
    assert len(ids) == len(set(ids)), "an event_id appears twice in events"
    assert set(ids) == truth.event_ids
    assert lake.read("quarantine").num_rows == truth.malformed
    episodes = {r["episode_id"]: r for r in lake.read("episodes").to_pylist()}
    assert {e: r["completeness"] for e, r in episodes.items()} == truth.completeness
    assert {e: r["status"] for e, r in episodes.items()} == truth.status
    assert lake.read("steps").num_rows == truth.steps
    rewards = {(r["episode_id"], r["judge_version"]): r["verdict"] for r in lake.read("rewards").to_pylist()}
    assert rewards == truth.rewards
    failing = {
        (r["episode_id"], r["judge_version"])
        for r in lake.read("failures").to_pylist()
        if r["judge_name"] == "tests"
    }
    assert failing == truth.failing
    assert lake.read("samples").num_rows == truth.samples


@pytest.fixture
def broker(fresh_broker: EmbeddedKafka) -> EmbeddedKafka:
    fresh_broker.start()
    return fresh_broker


def test_twenty_thousand_messy_events_give_exactly_the_expected_tables(
    broker: EmbeddedKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wl = make_workload(n_episodes=320)
    assert len(wl.phase1) + len(wl.phase2) > 20_000
    cfg = PipelineConfig(  # delta-rs compacts a table between batches once 2 small files share a partition
        bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"), max_batch_per_partition=1500,
        compact_min_files=2, executor="eager",  # small batches, in this process (pipelines.eager)
        eager_workers=2,  # records parsed and episodes folded by two worker processes too
    )  # fmt: skip
    from pipelines import beam_stages

    monkeypatch.setattr(beam_stages, "EPISODES_PER_FOLD", 40)  # several chunks of episodes to fold
    pool = shared_pool(2)
    assert pool is not None
    shipped = pool.shipped
    produce(broker.bootstrap, wl.phase1)
    batches = run_once(cfg)
    assert len(batches) > 1  # several micro-batches
    assert pool.shipped > shipped  # (the workers' part of the fold is checked with the rest below)

    # in this process each batch staged its commits in memory (no Parquet written and read back),
    # and dropped them when it was over
    assert beam_stages._IN_MEMORY == {}
    assert not list((Path(cfg.lake_root) / "_staging").rglob("*.parquet"))
    lake = Lake(cfg.lake_root)
    check(lake, wl.truth_after_1)
    # (which tables reach the threshold depends on how the messy records spread over partitions and
    # batches; events gets two files in one date partition from any two batches)
    assert any(h.get("operation") == "OPTIMIZE" for h in lake.table("events").history())
    assert all(lake.small_files(t) < 2 for t in PIPELINE_TABLES)  # every table kept under the threshold
    # Late events (and late re-judgements) fix episodes up in a later batch.
    produce(broker.bootstrap, wl.phase2)
    run_once(cfg)
    check(lake, wl.truth)
    # Running again adds nothing and commits nothing.
    versions = lake.versions()
    assert run_once(cfg) == []
    assert lake.versions() == versions
    # Time travel: the events table as it was after the first batch.
    assert lake.read("events", version=1).num_rows < lake.read("events").num_rows
    # Replay equals incremental; the replay is one batch on Beam's FnApiRunner and its worker
    # processes, so the two executors of the graph give the same lake.
    replayed = str(tmp_path / "replayed")
    beam = PipelineConfig(bootstrap=broker.bootstrap, lake_root=replayed, executor="beam", in_process_below=0)
    replay(beam)
    diffs = diff_lakes(lake, Lake(tmp_path / "replayed"))
    assert all(d.equal for d in diffs), [d for d in diffs if not d.equal]
    # ``auto`` cuts a backlog into batches the eager executor runs, each below the bound
    cut = PipelineConfig(  # (every step in this process: no worker)
        bootstrap=broker.bootstrap, lake_root=str(tmp_path / "cut"), in_process_below=2500, eager_workers=0
    )
    pending = backlog(cut)  # the whole backlog, not the first batch of it
    batches = replay(cut)
    assert len(batches) > 3 and all(b.records < 2500 for b in batches)
    assert pending == sum(b.records for b in batches)
    diffs = diff_lakes(lake, Lake(tmp_path / "cut"))
    assert all(d.equal for d in diffs), [d for d in diffs if not d.equal]


RUNNER = """
import sys
from pipelines import PipelineConfig, run_once
eager = sys.argv[3] == "eager"  # eager: many small batches in this process; beam: the FnApiRunner's
cfg = PipelineConfig(bootstrap=sys.argv[1], lake_root=sys.argv[2], executor=sys.argv[3],
                     max_batch_per_partition=40 if eager else 400,
                     compact_min_files=2)  # a kill may land in a compaction too
print("ready", flush=True)
while True:  # always at work when the kill comes: a batch, a compaction, or planning the next
    run_once(cfg)
"""


def test_sigkill_at_random_points_while_events_arrive_loses_and_duplicates_nothing(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    wl = make_workload(n_episodes=120, seed=9, steps_per_episode=10)
    records = wl.phase1 + wl.phase2
    lake_dir = tmp_path / "lake"
    done = threading.Event()

    def keep_producing() -> None:
        # Spread over the kills, so most of them land while there is work to do.
        chunk = max(1, len(records) // 16)
        for i in range(0, len(records), chunk):
            produce(broker.bootstrap, records[i : i + chunk])
            time.sleep(2.0)
        done.set()

    producer = threading.Thread(target=keep_producing)
    producer.start()
    rng = random.Random(2)
    kills = {"eager": 0, "beam": 0}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    attempt = 0
    while not done.is_set() or min(kills.values()) < 3:
        assert attempt < 60, kills
        executor = ("eager", "beam")[attempt % 2]
        attempt += 1
        # Its own process group: the kill takes the driver and its SDK worker
        # processes down together, as a crashed machine or container would.
        err = tmp_path / f"runner-{attempt}.err"
        with err.open("w") as err_file:
            proc = subprocess.Popen(
                [sys.executable, "-c", RUNNER, broker.bootstrap, str(lake_dir), executor],
                env=env,
                stdout=subprocess.PIPE,
                stderr=err_file,
                start_new_session=True,
                text=True,
            )
        assert proc.stdout is not None
        proc.stdout.readline()  # imports done: the kill lands in the run (eager batches take ~0.5 s)
        time.sleep(rng.uniform(0.1, 2.5) if executor == "eager" else rng.uniform(1.0, 6.0))
        # The runner loops until killed: one that has stopped by itself failed.
        assert proc.poll() is None, err.read_text()[-3000:]
        kills[executor] += 1
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    producer.join(120)
    print(f"runs killed while running: {kills}")
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(lake_dir))
    run_once(cfg)  # the final clean run
    lake = Lake(lake_dir)
    check(lake, wl.truth)
    ids = Counter(lake.read("events").column("event_id").to_pylist())
    assert max(ids.values()) == 1
    replay(PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "clean")))
    diffs = diff_lakes(lake, Lake(tmp_path / "clean"))
    assert all(d.equal for d in diffs), [d for d in diffs if not d.equal]
