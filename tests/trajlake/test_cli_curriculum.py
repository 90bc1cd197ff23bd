"""``trajlake rollout --curriculum`` on a real broker, sandboxes and lake: pools from history, constant
groups replaced within the bound, every choice on the log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_events
from tests.trajlake.test_cli import TASKS, pyfix_task, run

pytestmark = pytest.mark.kafka


def test_the_curriculum_draws_by_pool_replaces_constant_groups_within_its_bound_and_logs_why(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)  # pyfix-004
    for extra in ("pyfix-002", "pyfix-012"):
        shutil.copytree(TASKS / "pyfix" / extra, tasks / extra)
    # history: pyfix-004 always passes (easy), pyfix-002 never does (hard), pyfix-012 was never run
    stuck = tmp_path / "stuck.yaml"
    stuck.write_text('"*":\n  - bash: "echo looked at it > NOTES.txt"\n')
    for task, policy in (("pyfix-004", "scripted:reference"), ("pyfix-002", f"scripted:{stuck}")):
        run(home, port, "rollout", "--tasks", str(tasks / task), "--policy", policy, "--workers", "1",
            "--episodes", "2", "--group-size", "2")  # fmt: skip
    run(home, port, "pipeline", "run", "--once")
    curriculum = tmp_path / "curriculum.yaml"
    curriculum.write_text("pools: {hard: {max: 0.25, weight: 1}, easy: {min: 0.75, weight: 1}}\n"
                          "unseen_weight: 1\nmax_refills: 1\n")  # fmt: skip

    # the reference passes everything: every group is constant; one is replaced (the bound), then no more
    proc = run(home, port, "rollout", "--tasks", str(tasks), "--policy", "scripted:reference",
               "--workers", "1", "--episodes", "2", "--group-size", "2", "--curriculum-file", str(curriculum),
               "--json")  # fmt: skip
    out = json.loads(proc.stdout)
    report = out["curriculum"]
    assert (report["constant_groups"], report["refilled"], report["unreplaced"], report["rounds"]) == (
        2,
        1,
        1,
        2,
    )
    pools = {c["task_id"]: c["pool"] for c in report["choices"]}
    assert len(pools) == 2 and set(pools.values()) <= {"easy", "hard", "unseen"}
    expected = {"pyfix-004": "easy", "pyfix-002": "hard", "pyfix-012": "unseen"}
    assert all(expected[t] == p for t, p in pools.items())
    assert len(out["episodes"]) == 4

    # on the log: each episode of the curriculum says which pool, why, the round, what it replaced
    started = [r.event for r in read_events(f"127.0.0.1:{port}", "trajlake.episodes")
               if r.event is not None and r.event.type == "episode_started"
               and "curriculum" in r.event.payload.metadata]  # fmt: skip
    assert len(started) == 4
    records = [e.payload.metadata["curriculum"] for e in started]
    first = [(e, c) for e, c in zip(started, records, strict=True) if c["round"] == 0]
    second = [(e, c) for e, c in zip(started, records, strict=True) if c["round"] == 1]
    assert len(first) == len(second) == 2
    assert {c["replaces"] for _, c in second} == {first[0][0].payload.group_id}
    for e, c in first + second:
        assert c["pool"] == expected[e.payload.task.id] and c["reason"]
