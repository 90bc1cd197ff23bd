"""The review queue as people use it: rules (data) fill it, reviewers answer through the API and the CLI,
reviewed episodes become golden cases that `judges verify` replays. Real broker, sandboxes and lake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api import create_app
from ingest.kafka_broker import EmbeddedKafka
from ingest.recorder import EpisodeRecorder
from lake import Lake
from tests.trajlake.test_cli import TASKS, run

pytestmark = pytest.mark.kafka

RULES = """\
rules:
  - {name: flagged, kind: flag, flags: [reward_hack_suspected], limit: 10}
  - {name: flips, kind: verdict_flip, limit: 10}
  - {name: judges-disagree, kind: judge_disagreement, limit: 10}
  - {name: surprising, kind: surprising_success, max_tool_calls: 2, max_task_pass_rate: 0.25,
     min_task_episodes: 4, limit: 10}
  - {name: spread, kind: high_variance, min_std: 0.4, limit: 10}
  - {name: calibration, kind: random, share: 1.0, limit: 1}
"""
ALICE = "alice-token-0123456789"


def _craft(bootstrap: str, home: Path) -> dict[str, str]:
    """Episodes that each rule should find (and one that none should), recorded like any worker's."""
    rec = EpisodeRecorder.open(bootstrap=bootstrap, home=home, worker_id="craft", topic="trajlake.episodes",
                               delivery="inline")  # fmt: skip
    ids: dict[str, str] = {}

    def episode(name: str, task: str, *rewards: tuple[str, str, str, float, list[str]], calls: int = 3,
                group: str | None = None) -> None:  # fmt: skip
        with rec.episode(task={"id": task, "version": "1", "family": "crafted"}, policy={"id": "p"},
                         group_id=group) as ep:  # fmt: skip
            for _ in range(calls):
                ep.tool_result(ep.tool_call("bash", {"command": "true"}), exit_code=0)
            for judge, version, verdict, score, flags in rewards:
                ep.reward(judge_name=judge, judge_version=version, score=score, verdict=verdict, flags=flags)
        ids[name] = ep.episode_id

    try:
        episode(
            "flag", "c-flag", ("composite", "v1", "pass", 1.0, ["reward_hack_suspected", "tests_touched"])
        )
        episode("flip", "c-flip", ("tests", "v1", "pass", 1.0, []), ("tests", "v2", "fail", 0.2, []))
        episode(
            "disagree", "c-dis", ("composite", "v1", "fail", 0.3, []), ("eval-judge", "e1", "pass", 1.0, [])
        )
        episode("surprising", "c-rare", ("composite", "v1", "pass", 1.0, []), calls=1)
        for i in range(3):
            episode(f"rare-fail-{i}", "c-rare", ("composite", "v1", "fail", 0.1, []))
        episode("spread-best", "c-var", ("composite", "v1", "pass", 1.0, []), group="g-var")
        episode("spread-worst", "c-var", ("composite", "v1", "fail", 0.0, []), group="g-var")
        rec.flush()
    finally:
        rec.close()
    return ids


def test_rules_fill_the_queue_reviewers_answer_and_reviews_become_golden_cases(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    task = TASKS / "pyfix" / "pyfix-004"  # the golden files' tasks root is the repository's
    stuck = tmp_path / "stuck.yaml"
    stuck.write_text('"*":\n  - bash: "echo looked at it > NOTES.txt"\n')
    for policy in ("scripted:reference", f"scripted:{stuck}"):
        run(home, port, "rollout", "--tasks", str(task), "--policy", policy, "--workers", "1",
            "--episodes", "2", "--group-size", "2")  # fmt: skip
    crafted = _craft(f"127.0.0.1:{port}", tmp_path)
    run(home, port, "pipeline", "run", "--once")
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)

    items = json.loads(run(home, port, "review", "fill", "--rules", str(rules), "--json").stdout)
    by_rule: dict[str, list[dict[str, str]]] = {}
    for it in items:
        by_rule.setdefault(it["rule"], []).append(it)
    found = {rule: {it["episode_id"] for it in its} for rule, its in by_rule.items() if rule != "calibration"}
    assert found == {
        "flagged": {crafted["flag"]},
        "flips": {crafted["flip"]},
        "judges-disagree": {crafted["disagree"]},
        "surprising": {crafted["surprising"]},
        "spread": {crafted["spread-best"]},
    }
    assert len(by_rule["calibration"]) == 1
    reasons = {rule: its[0]["reason"] for rule, its in by_rule.items()}
    assert "flagged it reward_hack_suspected" in reasons["flagged"]
    assert "tests v1 says pass, tests v2 says fail" == reasons["flips"]
    assert "eval-judge e1 says pass, composite v1 says fail" == reasons["judges-disagree"]
    assert "1 tool calls on c-rare, whose pass rate is 25% over 4 episodes" in reasons["surprising"]
    assert "group g-var" in reasons["spread"] and "scored 1.00 against a mean of 0.50" in reasons["spread"]
    assert "calibration" in reasons["calibration"]
    # the queue is a table folded from the log; filling again queues nothing twice (only a new random slice)
    assert Lake(home / "lake").read("review_queue").num_rows == len(items)
    [more] = json.loads(run(home, port, "review", "fill", "--rules", str(rules), "--json").stdout)
    assert more["rule"] == "calibration" and more["episode_id"] not in {it["episode_id"] for it in items}

    # a reviewer answers through the API: authenticated, recorded under the token's name
    from ingest.publish import publish_events

    def publish(events: list[object]) -> None:
        publish_events(f"127.0.0.1:{port}", "trajlake.curation", events)  # type: ignore[arg-type]

    app = create_app(
        home / "lake", token="reader-token-0123456789", reviewers={"alice": ALICE}, publish=publish
    )
    client = TestClient(app)
    post = f"/review/{crafted['flag']}"
    assert client.post(post, json={"verdict": "hack"}).status_code == 401
    wrong = client.post(
        post, json={"verdict": "hack"}, headers={"Authorization": "Bearer reader-token-0123456789"}
    )
    assert wrong.status_code == 401 and "no reviewer's" in wrong.json()["detail"]
    alice = {"Authorization": f"Bearer {ALICE}"}
    assert client.post(post, json={"verdict": "great"}, headers=alice).status_code == 422
    assert client.post("/review/no-such-episode", json={"verdict": "ok"}, headers=alice).status_code == 404
    accepted = client.post(post, json={"verdict": "hack", "note": "wrote the expected output"}, headers=alice)
    assert accepted.status_code == 202, accepted.text
    review = accepted.json()["review"]
    assert (review["reviewer"], review["verdict"], review["judge_verdict"]) == ("alice", "hack", "pass")
    assert review["item_id"] == next(it["item_id"] for it in by_rule["flagged"])
    # and through the CLI (the reviewer named by --by): the reference episode is right, a stuck one is not
    eps = Lake(home / "lake").read("episodes").to_pylist()
    ref = next(e["episode_id"] for e in eps if e["policy_id"] == "scripted-reference")
    stuck_ep = next(e["episode_id"] for e in eps if e["task_id"] == "pyfix-004" and e["status"] == "failure")
    run(home, port, "review", "verdict", ref, "--verdict", "ok", "--by", "bob")
    run(home, port, "review", "verdict", stuck_ep, "--verdict", "judge_wrong", "--by", "bob", "--note", "x")
    run(home, port, "pipeline", "run", "--once")
    reviews = {
        (r["episode_id"], r["reviewer"]): r["verdict"]
        for r in Lake(home / "lake").read("reviews").to_pylist()
    }
    assert reviews == {
        (crafted["flag"], "alice"): "hack",
        (ref, "bob"): "ok",
        (stuck_ep, "bob"): "judge_wrong",
    }
    queue = client.get("/review/queue", params={"status": "reviewed"}, headers=alice).json()
    flagged = [it for it in queue["items"] if it["rule"] == "flagged"]
    assert [it["episode_id"] for it in flagged] == [crafted["flag"]]
    assert flagged[0]["reviews"][0]["note"] == "wrote the expected output"
    assert {it["episode_id"] for it in queue["items"]} <= {crafted["flag"], ref, stuck_ep}

    # reviewed episodes become golden cases; verify replays them and fails where the judge is wrong
    golden = tmp_path / "reviews.yaml"
    added = json.loads(run(home, port, "judges", "golden", "add", "--from-reviews", "--out", str(golden),
                           "--json").stdout)  # fmt: skip
    assert sorted(added["added"]) == sorted(f"review-{e[-12:]}" for e in (ref, stuck_ep))
    assert [s["episode_id"] for s in added["skipped"]] == [crafted["flag"]]  # its task is not in the repo
    again = json.loads(run(home, port, "judges", "golden", "add", "--from-reviews", "--out", str(golden),
                           "--json").stdout)  # fmt: skip
    assert again["added"] == [] and again["already_there"] == 2
    verify = run(home, port, "judges", "verify", str(golden), check=False, timeout=600)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    out = verify.stdout + verify.stderr
    assert f"review-{stuck_ep[-12:]}" in out and "verdict pass -> fail" in out

    # the confirmed hack is taken out of training; the queue, the verdicts and the retraction are
    # projections of the log like every table: a replay rebuilds them row for row
    out = json.loads(run(home, port, "retract", "--episode", crafted["flag"], "--reason", "confirmed hack",
                         "--name", "hack-flag", "--json").stdout)  # fmt: skip
    assert out["retraction"]["scope"] == "episode" and out["impacted"] == []  # no checkpoint trained on it
    run(home, port, "retract", "--episode", crafted["flag"], "--reason", "again", "--name", "hack-flag")
    other = run(home, port, "retract", "--episode", ref, "--reason", "x", "--name", "hack-flag", check=False)
    assert other.returncode == 2 and "exists already" in other.stderr  # a retraction is never rewritten
    impacted = run(home, port, "lineage", "--impacted-by", "hack-flag", "--json")
    assert json.loads(impacted.stdout) == []
    run(home, port, "replay", "--into", str(tmp_path / "replayed"))
    keys = {
        "review_queue": ("item_id",),
        "reviews": ("episode_id", "reviewer"),
        "retractions": ("retraction_id",),
    }
    for table, key in keys.items():
        here = sorted(Lake(home / "lake").read(table).to_pylist(), key=lambda r: tuple(r[k] for k in key))
        there = sorted(
            Lake(tmp_path / "replayed").read(table).to_pylist(), key=lambda r: tuple(r[k] for k in key)
        )
        assert here == there and here, table
