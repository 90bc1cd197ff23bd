"""``trajlake drift`` as a user runs it, on a real broker, sandboxes and lake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from tests.trajlake.test_cli import pyfix_task, run

pytestmark = pytest.mark.kafka

POLICY = """\
"*":
  - bash: "cat README.md"
  - bash: "ls -la; date; echo pid $$"
  - bash: "python3 -m pytest -q tests 2>&1 | tail -3"
  - bash: "python3 -c 'import tempfile, os; print(tempfile.mkdtemp(), os.getpid(), object())'"
"""


def test_drift_reports_an_unchanged_environment_reproducible_and_finds_a_change_at_its_step(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)
    run(home, port, "tasks", "admit", str(tasks), "--runs", "1")
    policy = tmp_path / "look.yaml"
    policy.write_text(POLICY)
    run(home, port, "rollout", "--tasks", str(tasks), "--policy", f"scripted:{policy}", "--workers", "1",
        "--episodes", "2", "--group-size", "2")  # fmt: skip
    run(home, port, "pipeline", "run", "--once")

    # unchanged: every call's output is the same up to times, pids, temp paths and addresses
    report = json.loads(run(home, port, "drift", "--tasks", str(tasks), "--json").stdout)
    assert report["checked"] == 2 and report["reproducible"] == 2
    for e in report["episodes"]:
        assert (e["reproducible"], e["first_diverging_seq"], e["steps_checked"]) == (True, None, 4), e
        assert e["likely_causes"] == [] and e["image_recorded"] == e["image_now"] is not None
    rows = Lake(home / "lake").read("drift").to_pylist()
    assert {r["episode_id"] for r in rows} == {e["episode_id"] for e in report["episodes"]}
    assert all(r["reproducible"] for r in rows)

    # the environment changes under the first call: found there, with both outputs and the cause
    readme = tasks / "pyfix-004" / "repo" / "README.md"
    readme.write_text(readme.read_text() + "A line that was not there.\n")
    proc = run(home, port, "drift", "--tasks", str(tasks), "--json", check=False)
    assert proc.returncode == 1, proc.stderr
    changed = json.loads(proc.stdout)
    steps = Lake(home / "lake").read("steps").to_pylist()
    for e in changed["episodes"]:
        first_call = min(
            s["seq"] for s in steps if s["episode_id"] == e["episode_id"] and s["type"] == "tool_call"
        )
        assert (e["reproducible"], e["first_diverging_seq"], e["steps_checked"]) == (False, first_call, 1)
        assert e["recorded"]["arguments"] == {"command": "cat README.md"}
        assert "not there" in e["replayed"]["stdout"] and "not there" not in e["recorded"]["stdout"]
        assert any("initial state" in c for c in e["likely_causes"]), e["likely_causes"]
    # both runs are in the table, one row per episode and run; a replay rebuilds it row for row
    drift = Lake(home / "lake").read("drift").to_pylist()
    assert len(drift) == 4 and sorted(r["reproducible"] for r in drift) == [False, False, True, True]
    run(home, port, "replay", "--into", str(tmp_path / "replayed"))
    replayed = Lake(tmp_path / "replayed").read("drift").to_pylist()
    key = lambda r: (r["episode_id"], r["run_id"])  # noqa: E731
    assert sorted(replayed, key=key) == sorted(drift, key=key)

    # the task files say another version now: named even where the outputs still agree
    readme.write_text(readme.read_text().replace("A line that was not there.\n", ""))
    spec = tasks / "pyfix-004" / "task.yaml"
    spec.write_text(spec.read_text().replace("version: 1", "version: 2"))
    again = json.loads(run(home, port, "drift", "--tasks", str(tasks), "--json", "--no-fold").stdout)
    for e in again["episodes"]:
        assert e["reproducible"] is True
        assert any("changed version" in c for c in e["likely_causes"]), e["likely_causes"]


def test_drift_finds_a_recorded_output_altered_on_purpose_at_its_step(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    from ingest.recorder import EpisodeRecorder
    from judges.tasks import load_task

    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)
    task = load_task(tasks / "pyfix-004")
    rec = EpisodeRecorder.open(bootstrap=f"127.0.0.1:{port}", home=tmp_path, worker_id="w",
                               topic="trajlake.episodes", delivery="inline")  # fmt: skip
    try:
        with rec.episode(task=task.ref, policy={"id": "p"}) as ep:
            first = (task.initial_dir / "README.md").read_text().splitlines(keepends=True)[0]
            ep.tool_result(
                ep.tool_call("bash", {"command": "cat README.md | head -1"}), exit_code=0, stdout=first
            )
            forged = ep.tool_call("bash", {"command": "echo hi"})
            ep.tool_result(forged, exit_code=0, stdout="bye\n")  # not what the command prints
            ep.tool_result(ep.tool_call("bash", {"command": "true"}), exit_code=0)
            ep.reward(judge_name="composite", judge_version="v0", score=0.0, verdict="fail")
        rec.flush()
    finally:
        rec.close()
    run(home, port, "pipeline", "run", "--once")
    proc = run(home, port, "drift", "--tasks", str(tasks), "--episode", ep.episode_id, "--json", check=False)
    assert proc.returncode == 1, proc.stderr
    [e] = json.loads(proc.stdout)["episodes"]
    steps = Lake(home / "lake").read("steps").to_pylist()
    seq = next(s["seq"] for s in steps if s["episode_id"] == ep.episode_id and s["call_id"] == forged)
    assert (e["reproducible"], e["first_diverging_seq"], e["steps_checked"]) == (False, seq, 2)
    assert e["recorded"]["stdout"] == "bye\n" and e["replayed"]["stdout"] == "hi\n"
    assert any("neither the image nor the task changed" in c for c in e["likely_causes"])
