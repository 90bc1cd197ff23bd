"""The failure-case library as a user runs it: `failures cases`, `failures curate`, replay of the library."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from api.analysis import cluster_id
from ingest import EpisodeRecorder
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from tests.trajlake.test_cli import run

pytestmark = pytest.mark.kafka

ASSERT = "E   AssertionError: assert {a} == {b}\nFAILED tests/test_calc.py::test_add - AssertionError"
MISSING = "E   ModuleNotFoundError: No module named 'calc_{a}'"


def record(bootstrap: str, home: Path, topic: str, plan: list[tuple[str, str, str | None]]) -> list[str]:
    """One episode per ``(family, policy version, failing output or None for a pass)``; their ids."""
    ids = []
    with EpisodeRecorder.open(bootstrap=bootstrap, home=home, worker_id="w", topic=topic) as rec:
        for i, (family, version, output) in enumerate(plan):
            task = {"id": f"{family}-{i % 3:03d}", "version": "1", "family": family}
            with rec.episode(task=task, policy={"id": "p", "version": version}) as ep:
                c = ep.tool_call("bash", {"command": "pytest -q"})
                ep.tool_result(c, exit_code=0 if output is None else 1, stdout=output or "1 passed")
                ep.reward(
                    judge_name="tests",
                    judge_version="v1",
                    score=1.0 if output is None else 0.0,
                    verdict="pass" if output is None else "fail",
                )
                ids.append(ep.episode_id)
        rec.flush()
    return ids


def test_cases_curate_and_replay(kafka: EmbeddedKafka, topics_env: dict[str, str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**topics_env, "TRAJLAKE_USER": "ana"}
    port = int(kafka.bootstrap.rsplit(":", 1)[1])
    plan: list[tuple[str, str, str | None]] = []
    for i in range(4):  # the same assertion on other values: one signature
        plan.append(("pyfix", "ckpt-1", ASSERT.format(a=i, b=i + 1)))
    plan.append(("pyfix", "ckpt-1", MISSING.format(a=7)))
    plan.append(("pyfix", "ckpt-1", None))
    for i in range(2):
        plan.append(("pyfix", "ckpt-2", ASSERT.format(a=10 + i, b=3)))
    plan.append(("calc", "ckpt-2", ASSERT.format(a=1, b=2)))  # the same signature in another family
    plan.append(("calc", "ckpt-2", None))
    ids = record(kafka.bootstrap, home, topics_env["TRAJLAKE_TOPIC_EPISODES"], plan)
    run(home, port, "pipeline", "run", "--once", env=env)
    lake = Lake(home / "lake")
    failures = lake.read("failures").to_pylist()
    assert len(failures) == 8
    # what the clusters must be, from the failures table itself
    families = {ids[i]: plan[i][0] for i in range(len(plan))}
    versions = {ids[i]: plan[i][1] for i in range(len(plan))}
    truth: dict[str, list[str]] = {}
    for f in failures:
        truth.setdefault(cluster_id(families[f["episode_id"]], f["category"], f["signature"]), []).append(
            f["episode_id"]
        )
    assert sorted(len(v) for v in truth.values()) == [1, 1, 6]

    got = json.loads(run(home, port, "failures", "cases", "--json", env=env).stdout)
    assert [c["count"] for c in got] == [6, 1, 1]  # biggest first
    assert {c["cluster_id"]: c["count"] for c in got} == {k: len(v) for k, v in truth.items()}
    big = got[0]
    assert big["family"] == "pyfix" and big["category"] == "test_failure"
    assert "AssertionError" in big["signature"]
    members = truth[big["cluster_id"]]
    # the newest five, newest first; the trend in the order the policy versions first acted
    assert big["examples"] == sorted(members, reverse=True)[:5]
    assert big["trend"] == [["ckpt-1", 4], ["ckpt-2", 2]]
    assert Counter(versions[e] for e in members) == {"ckpt-1": 4, "ckpt-2": 2}
    assert big["cases"] == []
    calc = [c for c in got if c["family"] == "calc"]
    assert (
        len(calc) == 1
        and calc[0]["signature"] == big["signature"]
        and calc[0]["cluster_id"] != big["cluster_id"]
    )
    table = run(home, port, "failures", "cases", "--family", "pyfix", env=env).stdout
    assert big["cluster_id"] in table and calc[0]["cluster_id"] not in table

    # curate by a unique start of the id; the case is folded from the log
    proc = run(home, port, "failures", "curate", big["cluster_id"][:9], "--name", "pyfix-assert",
               "--note", "off by one in add", "--json", env=env)  # fmt: skip
    row = json.loads(proc.stdout)
    assert "failure_cases" in proc.stderr and "pyfix-assert" in proc.stderr
    [case] = Lake(home / "lake").read("failure_cases").to_pylist()
    assert case["case_id"] == "pyfix-assert" and case["cluster_id"] == big["cluster_id"]
    assert case["count"] == 6 and sorted(case["episode_ids"]) == sorted(members)
    assert case["episode_ids"][0] == case["example_episode_id"] == max(members)
    assert case["policy_versions"] == ["ckpt-1", "ckpt-2"]
    assert case["curated_by"] == "ana" and case["notes"] == "off by one in add"
    assert case["judge_name"] == "tests" and case["judge_version"] == "v1"
    newest = plan[ids.index(max(members))][2]
    assert newest is not None and newest.splitlines()[0] in case["failing_observation"]
    assert row["case_id"] == case["case_id"] and row["count"] == case["count"]
    assert json.loads(run(home, port, "failures", "cases", "--json", env=env).stdout)[0]["cases"] == [
        "pyfix-assert"
    ]

    # curating the name again updates the case (the latest curation wins)
    run(home, port, "failures", "curate", big["cluster_id"], "--name", "pyfix-assert", "--note", "fixed note",
        env=env)  # fmt: skip
    [case] = Lake(home / "lake").read("failure_cases").to_pylist()
    assert case["notes"] == "fixed note"

    # the library is a projection of the log: a replay rebuilds it row for row
    run(home, port, "replay", "--into", str(tmp_path / "replayed"), env=env)
    assert Lake(tmp_path / "replayed").read("failure_cases").to_pylist() == [case]


def test_curate_refuses_bad_names_and_unknown_clusters(
    kafka: EmbeddedKafka, topics_env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    port = int(kafka.bootstrap.rsplit(":", 1)[1])
    ids = record(kafka.bootstrap, home, topics_env["TRAJLAKE_TOPIC_EPISODES"],
                 [("pyfix", "ckpt-1", ASSERT.format(a=1, b=2))])  # fmt: skip
    assert ids
    run(home, port, "pipeline", "run", "--once", env=topics_env)
    [c] = json.loads(run(home, port, "failures", "cases", "--json", env=topics_env).stdout)
    bad = run(
        home, port, "failures", "curate", c["cluster_id"], "--name", "Has Spaces", env=topics_env, check=False
    )
    assert bad.returncode == 2 and "is not a case name" in bad.stderr and "Traceback" not in bad.stderr
    unknown = run(
        home, port, "failures", "curate", "fc-000000000000", "--name", "x", env=topics_env, check=False
    )
    assert unknown.returncode == 2 and "no failure cluster" in unknown.stderr
    gone = {**topics_env, "TRAJLAKE_TOPIC_CURATION": topics_env["TRAJLAKE_TOPIC_CURATION"] + ".missing"}
    missing = run(home, port, "failures", "curate", c["cluster_id"], "--name", "x", env=gone, check=False)
    assert (
        missing.returncode == 3 and "does not exist" in missing.stderr and "trajlake topics" in missing.stderr
    )
    other = run(home, port, "failures", "cases", "--judge", "nope", env=topics_env, check=False)
    assert other.returncode != 0 and "nope" in other.stderr and "Traceback" not in other.stderr
    assert (
        "failure_cases" not in Lake(home / "lake").versions()
        or not Lake(home / "lake").read("failure_cases").num_rows
    )


def test_a_case_event_that_is_not_a_row_is_quarantined() -> None:
    from schemas.control import CASE, control_event, control_row
    from schemas.errors import SchemaError

    row = {
        "case_id": "ok-name", "cluster_id": "fc-0", "family": None, "category": "test_failure",
        "signature": "s", "judge_name": "j", "judge_version": "1", "count": 1, "episode_ids": ["e"],
        "task_ids": [], "policy_versions": [], "example_episode_id": "e", "failing_seq": None,
        "failing_observation": None, "message": None, "notes": None, "curated_by": "me",
        "curated_at": "2026-12-05T00:00:00+00:00",
    }  # fmt: skip
    event = control_event(CASE, row, "w")
    assert control_row(event)[1]["count"] == 1
    with pytest.raises(SchemaError, match="case_id"):
        control_event(CASE, {**row, "case_id": "Bad Name"}, "w")
    with pytest.raises(SchemaError, match="count"):
        control_event(CASE, {**row, "count": "many"}, "w")
    # consistent with itself: episodes listed, the example among them, a count that covers them
    with pytest.raises(SchemaError, match="episode_ids"):
        control_event(CASE, {**row, "episode_ids": []}, "w")
    with pytest.raises(SchemaError, match="example_episode_id"):
        control_event(CASE, {**row, "example_episode_id": "other"}, "w")
    with pytest.raises(SchemaError, match="count"):
        control_event(CASE, {**row, "count": -5}, "w")


def test_a_failed_judgement_keeps_the_judges_test_output(
    kafka: EmbeddedKafka, topics_env: dict[str, str], tmp_path: Path
) -> None:
    """A composite judge's failed tests name the cluster, and the case keeps the test output it saw."""
    home = tmp_path / "home"
    port = int(kafka.bootstrap.rsplit(":", 1)[1])
    tail = "FAILED tests_hidden/test_calc.py::test_add - AssertionError: assert 3 == 4\n1 failed, 2 passed"
    evidence = {
        "correctness": {
            "tests": [{"name": "tests_hidden.test_calc::test_add", "status": "failed"},
                      {"name": "tests_hidden.test_calc::test_sub", "status": "passed"}],
            "output_tail": tail,
        },
        "efficiency": {"score": 1.0},
    }  # fmt: skip
    with EpisodeRecorder.open(bootstrap=kafka.bootstrap, home=home, worker_id="w",
                              topic=topics_env["TRAJLAKE_TOPIC_EPISODES"]) as rec:  # fmt: skip
        for _ in range(2):
            with rec.episode(task={"id": "pyfix-001", "family": "pyfix"}, policy={"id": "p"}) as ep:
                c = ep.tool_call("bash", {"command": "cat calc.py"})
                ep.tool_result(c, exit_code=0, stdout="def add(a, b): return a - b")
                ep.reward(
                    judge_name="composite", judge_version="c1", score=0.5, verdict="fail", evidence=evidence
                )
        rec.flush()
    run(home, port, "pipeline", "run", "--once", env=topics_env)
    [c] = json.loads(run(home, port, "failures", "cases", "--json", env=topics_env).stdout)
    assert c["count"] == 2 and c["signature"] == "test_failure: failed: tests_hidden.test_calc::test_add"
    run(home, port, "failures", "curate", c["cluster_id"], "--name", "calc-add", env=topics_env)
    [case] = Lake(home / "lake").read("failure_cases").to_pylist()
    assert case["failing_observation"] == tail
