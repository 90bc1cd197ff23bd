"""``trajlake judges impact``: the gate on judge changes as CI would run it (real broker, sandboxes, lake)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from pipelines.impact import group_changes
from tests.trajlake.test_cli import pyfix_task, run

pytestmark = pytest.mark.kafka

# the unfixed code passes these two hidden tests: a judge that runs only them passes doing nothing
LENIENT = json.dumps({"name": "tests", "config": {"extra_args": ["-k", "blank_values or leading_question"]}})


def test_the_gate_fails_above_its_flip_rate_and_queues_the_flips_for_review(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)
    stuck = tmp_path / "stuck.yaml"
    stuck.write_text('"*":\n  - bash: "echo looked at it > NOTES.txt"\n')
    for policy in ("scripted:reference", f"scripted:{stuck}"):
        run(home, port, "rollout", "--tasks", str(tasks), "--policy", policy, "--workers", "1",
            "--episodes", "2", "--group-size", "2")  # fmt: skip
    run(home, port, "pipeline", "run", "--once")
    rewards_before = Lake(home / "lake").read("rewards").num_rows

    impact = ("judges", "impact", "--judge", LENIENT, "--tasks", str(tasks))
    gate = run(home, port, *impact, "--max-flip-rate", "0.25", "--json", check=False)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    report = json.loads(gate.stdout)
    assert (report["compared"], report["flips"], report["flip_rate"]) == (4, 2, 0.5)
    assert report["by_family"] == {"pyfix": {"compared": 4, "flips": 2, "pass_to_fail": 0, "fail_to_pass": 2}}
    assert {(f["from"], f["to"]) for f in report["flipped"]} == {("fail", "pass")}
    assert report["groups"]["checked"] == 2 and report["groups"]["became_constant"] == []
    assert "above --max-flip-rate" in gate.stderr
    # a dry run: no judgement reached the log; the flipped episodes wait for a person
    lake = Lake(home / "lake")
    assert lake.read("rewards").num_rows == rewards_before
    queued = lake.read("review_queue").to_pylist()
    assert report["queued_for_review"] == 2 and {q["episode_id"] for q in queued} == {
        f["episode_id"] for f in report["flipped"]
    }
    assert all("would say pass" in q["reason"] and "says fail" in q["reason"] for q in queued)

    # under the threshold it passes; the same flips are not queued twice; a filter narrows the selection
    ok = json.loads(run(home, port, *impact, "--max-flip-rate", "0.5", "--json").stdout)
    assert ok["flip_rate"] == 0.5 and ok["queued_for_review"] == 0
    passed = json.loads(
        run(home, port, *impact, "--where", "status = 'success'", "--max-flip-rate", "0", "--json").stdout
    )
    assert (passed["compared"], passed["flips"]) == (2, 0)
    bad = run(home, port, *impact, "--where", "nosuchcolumn = 1", check=False)
    assert bad.returncode == 2 and "is not a predicate over the episodes table" in bad.stderr


def test_group_changes_name_sign_flips_and_groups_left_without_signal() -> None:
    groups = {
        "same": [("a", 1.0, 1.0), ("b", 0.0, 0.0)],
        "flipped": [("c", 1.0, 0.0), ("d", 0.0, 1.0)],  # the learner would push the other way
        "flat": [("e", 1.0, 0.5), ("f", 0.0, 0.5)],  # no signal left
        "was-flat": [("g", 0.5, 1.0), ("h", 0.5, 0.0)],  # a signal appears: no sign flips (0 before)
        "alone": [("i", 1.0, 0.0)],
    }
    changed, constant = group_changes(groups)
    assert changed == [{"group_id": "flipped", "episodes": ["c", "d"]}]
    assert constant == ["flat"]
