"""``trajlake rejudge`` as a user runs it: roll out, fold, re-judge with another judge version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from tests.trajlake.test_cli import pyfix_task, run

TASKS = Path(__file__).resolve().parents[2] / "tasks"
LENIENT = {"name": "tests", "config": {"extra_args": ["-k", "blank_values or leading_question"]}}

pytestmark = pytest.mark.kafka


def test_rollout_fold_and_rejudge_from_the_cli(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)
    common = ("--tasks", str(tasks))
    run(home, port, "rollout", *common, "--policy", "scripted:reference", "--workers", "1",
        "--episodes", "2", "--group-size", "2")  # fmt: skip
    run(home, port, "pipeline", "run", "--once")
    out = run(home, port, "rejudge", *common, "--judge", json.dumps(LENIENT), "--json").stdout
    report = json.loads(out[out.index("{") :])
    assert (report["judged"], report["skipped"], report["errors"]) == (2, 0, 0)
    assert report["flips"] == [{"from": "pass", "to": "pass", "count": 2}]
    assert report["folded_records"] == 2
    rows = [r for r in Lake(home / "lake").read("rewards").to_pylist() if r["judge_name"] == "tests"]
    assert len(rows) == 2 and {r["rejudge_run_id"] for r in rows} == {report["run_id"]}
    # the same request again: every episode is already scored by that version
    again = run(home, port, "rejudge", *common, "--judge", json.dumps(LENIENT)).stdout
    assert "0 judged, 2 skipped" in again and "already scored" in again
    bad = run(home, port, "rejudge", *common, "--judge", "{not json", check=False)
    assert bad.returncode == 2 and "--judge" in bad.stderr and "not JSON" in bad.stderr
    bad = run(home, port, "rejudge", *common, "--run-id", "x", check=False)
    assert bad.returncode == 1 and "run ids look like" in bad.stderr
