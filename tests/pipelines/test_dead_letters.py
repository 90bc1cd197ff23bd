"""A stream the fold cannot assemble is a dead letter in quarantine; its neighbours and its old rows stay."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

import fold.rows as stages
from fold.rows import FOLD_ERROR
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from pipelines import PipelineConfig, run_once
from tests.pipelines.factories import ended, model, started, wire
from tests.pipelines.log_workload import produce

pytestmark = pytest.mark.kafka


def test_a_fold_that_raises_quarantines_the_stream_and_keeps_its_rows(
    kafka: EmbeddedKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"t.dead.{os.getpid()}.{random.getrandbits(24):06x}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2}).ensure_topics()
    # in one process, so that the fault injected below reaches the fold
    cfg = PipelineConfig(
        bootstrap=kafka.bootstrap, lake_root=str(tmp_path / "lake"), topics=(topic,), running_mode="in_memory"
    )
    lake = Lake(cfg.lake_root)

    def send(*docs: dict[str, Any]) -> None:
        produce(kafka.bootstrap, [(topic, d["episode_id"].encode(), wire(d)) for d in docs])

    send(started("ep-bad"), model("ep-bad", 1), ended("ep-bad", 2, "failure"))
    run_once(cfg)
    before = {r["episode_id"]: r for r in lake.read("episodes").to_pylist()}
    assert before["ep-bad"]["status"] == "failure"

    real = stages.fold_episode

    def broken(episode_id: str, events: Any) -> Any:
        if episode_id == "ep-bad":
            raise RuntimeError("projection bug")
        return real(episode_id, events)

    monkeypatch.setattr(stages, "fold_episode", broken)
    send(started("ep-good"), ended("ep-good", 1, "success"), model("ep-bad", 3))
    run_once(cfg)
    episodes = {r["episode_id"]: r for r in lake.read("episodes").to_pylist()}
    assert episodes["ep-good"]["status"] == "success"  # the batch landed around the dead letter
    assert episodes["ep-bad"] == before["ep-bad"]  # its rows stay as they were
    [letter] = [r for r in lake.read("quarantine").to_pylist() if r["error"].startswith(FOLD_ERROR)]
    assert letter["error"] == f"{FOLD_ERROR}ep-bad: RuntimeError: projection bug"
    assert len(json.loads(letter["raw"])["event_ids"]) == 4  # every event of the stream, by id
    assert lake.read("steps").num_rows == 3 + 2  # ep-bad's late step is not folded yet

    # once the projection works again, the next event of the stream folds all of it
    monkeypatch.setattr(stages, "fold_episode", real)
    send(model("ep-bad", 4))
    run_once(cfg)
    steps = [r for r in lake.read("steps").to_pylist() if r["episode_id"] == "ep-bad"]
    assert sorted(r["seq"] for r in steps) == [0, 1, 2, 3, 4]
