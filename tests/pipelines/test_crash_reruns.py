"""A run killed between its commits is finished by the next one, whatever the batch held.

A pipeline process is killed (``os._exit``, no cleanup) right after its ``events`` commit,
before the derived tables commit; the log may grow before the next run, so that run's
range differs from the killed one's and re-reads offsets ``events`` already holds. The lake
it leaves must equal a clean replay of the log. Found by an adversarial review: a re-read
copy tied with its own stored row and was taken for a rival (the next runs failed for good,
or crashed on a large batch), and the episode that lost a swapped event kept its stale rows.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake, diff_lakes
from pipelines import PipelineConfig, PipelineError, replay, run_once
from schemas import new_id
from tests.pipelines.factories import ev, model, started, wire
from tests.pipelines.log_workload import produce

pytestmark = pytest.mark.kafka

EPISODES = "trajlake.episodes"
ROOT = Path(__file__).resolve().parents[2]

KILLED_AFTER_EVENTS = """
import os, sys
import lake.store as store
from pipelines import PipelineConfig, run_once
real = store.Lake._write
def write(self, name, rows, **kw):
    out = real(self, name, rows, **kw)
    if name == "events" and out:
        os._exit(9)  # the events commit landed; nothing after it did
    return out
store.Lake._write = write
cfg = PipelineConfig(bootstrap=sys.argv[1], lake_root=sys.argv[2], running_mode="in_memory", num_workers=1)
run_once(cfg)
"""


@pytest.fixture
def broker(fresh_broker: EmbeddedKafka) -> EmbeddedKafka:
    fresh_broker.start()
    return fresh_broker


def send(bootstrap: str, records: list[tuple[bytes, bytes, int]]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for key, value, part in records:
        p.send(EPISODES, key=key, value=value, partition=part).get(30)
    p.close()


def killed_after_events(cfg: PipelineConfig) -> None:
    run = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_EVENTS, cfg.bootstrap, cfg.lake_root],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 9, run.stderr[-3000:]


def assert_replay_equals(cfg: PipelineConfig, into: Path) -> None:
    replay(PipelineConfig(bootstrap=cfg.bootstrap, lake_root=str(into)))
    diffs = diff_lakes(cfg.lake(), Lake(into))
    assert all(d.equal for d in diffs), [d for d in diffs if not d.equal]


def annotation(episode: str, event_id: str, value: str) -> bytes:
    return wire({**ev(episode, 1, "annotation", {"key": "k", "value": value}), "event_id": event_id})


def test_a_killed_batch_with_a_conflict_is_finished_after_the_log_grew(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    eid = new_id()
    send(broker.bootstrap, [(b"ep", wire(started("ep")), 0), (b"ep", annotation("ep", eid, "a"), 0),
                            (b"ep", annotation("ep", eid, "b"), 0)])  # fmt: skip
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    killed_after_events(cfg)
    assert cfg.lake().read("episodes").num_rows == 0  # killed before the derived tables
    send(broker.bootstrap, [(b"ep", wire(model("ep", 2)), 0)])  # a range the killed run never had
    run_once(cfg)
    run_once(cfg)  # and again: nothing left to do, nothing changes
    lake = cfg.lake()
    [q] = lake.read("quarantine").to_pylist()
    assert (q["partition"], q["offset"]) == (0, 2) and q["error"].startswith("conflict: ")
    assert [(r["episode_id"], r["num_events"]) for r in lake.read("episodes").to_pylist()] == [("ep", 3)]
    assert_replay_equals(cfg, tmp_path / "replayed")


def test_the_episode_that_lost_a_swapped_event_is_folded_again_after_a_kill(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    eid = new_id()
    send(broker.bootstrap, [(b"ep-a", wire(started("ep-a")), 5), (b"ep-a", annotation("ep-a", eid, "a"), 5),
                            (b"ep-b", wire(started("ep-b")), 1)])  # fmt: skip
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    run_once(cfg)
    # partition 1 sorts before 5: this copy names the event, and ep-a loses it
    send(broker.bootstrap, [(b"ep-b", annotation("ep-b", eid, "b"), 1)])
    killed_after_events(cfg)
    run_once(cfg)
    lake = cfg.lake()
    steps = sorted((r["episode_id"], r["seq"]) for r in lake.read("steps").to_pylist())
    assert steps == [("ep-a", 0), ("ep-b", 0), ("ep-b", 1)], steps
    assert_replay_equals(cfg, tmp_path / "replayed")


def test_a_large_killed_batch_is_finished_by_the_next_run(broker: EmbeddedKafka, tmp_path: Path) -> None:
    records = []
    for e in range(600):
        ep = f"ep{e}"
        records += [(EPISODES, ep.encode(), wire(started(ep)))]
        records += [(EPISODES, ep.encode(), wire(model(ep, s))) for s in range(1, 20)]
    produce(broker.bootstrap, records)
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"),
                         running_mode="in_memory", num_workers=1)  # fmt: skip
    killed_after_events(cfg)
    assert cfg.lake().read("events").num_rows == 12_000
    produce(broker.bootstrap, [(EPISODES, b"ep0", wire(model("ep0", 20)))])
    run_once(cfg)
    lake = cfg.lake()
    assert lake.read("events").num_rows == 12_001 and lake.read("episodes").num_rows == 600
    assert lake.read("steps").num_rows == 12_001


def test_records_deleted_from_the_log_before_the_lake_read_them_stop_the_run(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    docs = [started("ep")] + [model("ep", i) for i in range(1, 20)]
    send(broker.bootstrap, [(b"ep", wire(d), 0) for d in docs[:10]])
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    run_once(cfg)
    send(broker.bootstrap, [(b"ep", wire(d), 0) for d in docs[10:]])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.delete_records({TopicPartition(EPISODES, 0): 15})  # offsets 10..14 never reached the lake
    finally:
        admin.close()
    with pytest.raises(PipelineError, match=f"offsets 10 to 14 of {EPISODES}/0 are gone from the log"):
        run_once(cfg)
    assert cfg.lake().read("events").num_rows == 10  # nothing skipped, nothing half-written
