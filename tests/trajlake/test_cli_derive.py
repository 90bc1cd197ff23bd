"""``trajlake tasks derive``: a failure case -> task drafts -> admission, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from judges.tasks import load_task
from lake import Lake
from tests.trajlake.test_cli import pyfix_task, run

pytestmark = pytest.mark.kafka


def test_a_case_becomes_an_admitted_task_that_starts_where_the_episode_stopped(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)
    # a policy that leaves a note and fixes nothing: every episode fails at its judgement
    policy = tmp_path / "stuck.yaml"
    policy.write_text('"*":\n  - bash: "echo looked at it > NOTES.txt"\n')
    run(home, port, "rollout", "--tasks", str(tasks), "--policy", f"scripted:{policy}", "--workers", "1",
        "--episodes", "2", "--group-size", "2")  # fmt: skip
    run(home, port, "pipeline", "run", "--once")
    [cluster] = json.loads(run(home, port, "failures", "cases", "--json").stdout)
    assert cluster["count"] == 2 and cluster["family"] == "pyfix"
    run(home, port, "failures", "curate", cluster["cluster_id"], "--name", "stuck-on-equals")

    out = tmp_path / "drafts"
    proc = run(home, port, "tasks", "derive", "stuck-on-equals", "--tasks", str(tasks), "--out", str(out),
               "--runs", "1", "--json")  # fmt: skip
    [admitted] = json.loads(proc.stdout[proc.stdout.index("[") :])
    assert admitted["admitted"] is True, admitted
    draft = load_task(out / "pyfix-004.stuck-on-equals")
    lineage = draft.spec.lineage
    assert lineage is not None and lineage.case == "stuck-on-equals" and lineage.derived_from == "pyfix-004@1"
    assert lineage.episode == max(cluster["examples"])  # the newest failing episode
    # it starts from the state the episode left, and its reference goes from there to the fix
    assert (draft.initial_dir / "NOTES.txt").read_text() == "looked at it\n"
    patch = draft.reference_bytes().decode()
    assert "NOTES.txt" in patch and 'split("=", 1)' in patch
    assert not (draft.root / "solution.patch").exists() and (draft.root / "DRAFT.md").is_file()
    assert draft.spec.instruction.startswith("The repository is exactly as an earlier attempt")
    assert "test_" not in draft.spec.instruction.split("The original request follows.")[0]
    # admission's row is folded; its spec names the case
    [row] = [r for r in Lake(home / "lake").read("tasks").to_pylist() if r["task_id"] == draft.id]
    assert row["admitted"] and json.loads(row["spec"])["lineage"]["case"] == "stuck-on-equals"

    again = run(home, port, "tasks", "derive", "stuck-on-equals", "--tasks", str(tasks), "--out", str(out),
                "--no-admit", check=False)  # fmt: skip
    assert again.returncode != 0 and "exists already" in again.stderr and "Traceback" not in again.stderr
    unknown = run(home, port, "tasks", "derive", "no-such-case", "--tasks", str(tasks), "--out", str(out),
                  check=False)  # fmt: skip
    assert unknown.returncode == 2 and "no failure case" in unknown.stderr
