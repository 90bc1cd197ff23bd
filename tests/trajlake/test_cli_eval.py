"""``trajlake eval`` and the train/eval split as a user runs them, on a real broker, sandboxes and lake."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_events
from judges.splits import hashed_split
from lake import Lake
from tests.trajlake.test_cli import TASKS, pyfix_task, run

pytestmark = pytest.mark.kafka


def test_training_never_samples_an_eval_task_and_an_evaluation_is_recorded_apart(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)  # pyfix-004: train by its id's hash
    shutil.copytree(TASKS / "pyfix" / "pyfix-006", tasks / "pyfix-006")  # eval by its id's hash
    assert (hashed_split("pyfix-004"), hashed_split("pyfix-006")) == ("train", "eval")
    run(home, port, "tasks", "admit", str(tasks), "--runs", "1")
    splits = {r["task_id"]: r["split"] for r in Lake(home / "lake").read("tasks").to_pylist()}
    assert splits == {"pyfix-004": "train", "pyfix-006": "eval"}

    # training rollouts sample the whole folder (three tasks asked for): only the train task is drawn
    run(home, port, "rollout", "--tasks", str(tasks), "--policy", "scripted:reference", "--workers", "1",
        "--episodes", "6", "--group-size", "2")  # fmt: skip
    stuck = tmp_path / "stuck.yaml"
    stuck.write_text('"*":\n  - bash: "echo looked at it > NOTES.txt"\n')
    proc = run(home, port, "eval", "--policy", "scripted:reference", "--tasks", str(tasks), "--samples", "2",
               "--against", f"scripted:{stuck}", "--json")  # fmt: skip
    report = json.loads(proc.stdout)
    assert {e["task_id"] for e in report["episodes"]} == {"pyfix-006"}
    assert (report["pass_at_1"], report["n"], report["tasks"]) == (1.0, 2, 1)
    assert 0 < report["ci_low"] < 1.0 == report["ci_high"]  # one task: far from certain
    assert report["pass_at_k"]["k"] == 2 and report["judge_gap"] == 0.0
    cmp = report["comparison"]
    assert cmp["pass_at_1"] == 0.0 and cmp["difference"]["value"] == -1.0
    assert cmp["difference"]["ci_high"] > 0  # one task cannot show a difference, however large

    # on the log: every training episode is of a train task; the evaluation's are tagged and eval-only
    started = [r.event for r in read_events(f"127.0.0.1:{port}", "trajlake.episodes")
               if r.event is not None and r.event.type == "episode_started"]  # fmt: skip
    train = [e for e in started if e.payload.metadata.get("source") != "eval"]
    evals = [e for e in started if e.payload.metadata.get("source") == "eval"]
    assert len(train) == 2 and {e.payload.task.id for e in train} == {"pyfix-004"}
    assert len(evals) == 4 and {e.payload.task.id for e in evals} == {"pyfix-006"}
    assert len({e.payload.metadata["eval_run"] for e in evals}) == 1
    sources = Lake(home / "lake").read("episodes").column("source").to_pylist()
    assert sorted(sources) == ["eval"] * 4 + ["rollout"] * 2
    # and no dataset trains on them: an export counts them as excluded
    run(home, port, "export", "--format", "hf", "--out", str(tmp_path / "export"))
    lineage = json.loads((tmp_path / "export" / "lineage.json").read_text())
    assert lineage["samples_excluded"]["eval"] == 4  # (the scripted policy has no tokens to train on)
    # a worker that records an eval task's episode as a training one changes nothing: the split decides
    from ingest.recorder import EpisodeRecorder

    rec = EpisodeRecorder.open(bootstrap=f"127.0.0.1:{port}", home=tmp_path, worker_id="forger",
                               topic="trajlake.episodes", delivery="inline")  # fmt: skip
    try:
        with rec.episode(task={"id": "pyfix-006", "version": "1", "family": "pyfix"}, policy={"id": "p"},
                         metadata={"source": "rollout"}) as ep:  # fmt: skip
            ep.reward(
                judge_name="composite", judge_version=report["judge"]["version"], score=1.0, verdict="pass"
            )
        rec.flush()
    finally:
        rec.close()
    run(home, port, "pipeline", "run", "--once")
    run(home, port, "export", "--format", "hf", "--out", str(tmp_path / "export2"))
    lineage = json.loads((tmp_path / "export2" / "lineage.json").read_text())
    assert lineage["samples_excluded"]["eval"] == 5

    # the split is assigned once: a new version that declares another split keeps the recorded one
    spec = tasks / "pyfix-006" / "task.yaml"
    spec.write_text(spec.read_text().replace("version: 1", "version: 2") + "split: train\n")
    assert "version: 2" in spec.read_text()
    run(home, port, "tasks", "admit", str(tasks / "pyfix-006"), "--runs", "1")
    rows = [r for r in Lake(home / "lake").read("tasks").to_pylist() if r["task_id"] == "pyfix-006"]
    assert sorted((r["version"], r["split"]) for r in rows) == [("1", "eval"), ("2", "eval")]

    # a folder with no eval task says how to evaluate it anyway
    only_train = pyfix_task(tmp_path / "other")
    none = run(home, port, "eval", "--policy", "scripted:reference", "--tasks", str(only_train), check=False)
    assert none.returncode != 0 and "--split all" in none.stderr and "Traceback" not in none.stderr
