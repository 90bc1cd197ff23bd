"""A small lake with a known story, produced to the real broker and folded by the real pipeline.

Twelve episodes over four tasks of two families and two policy versions, each
failing (or not) in a different way; the judge ``tests`` scores them at
version ``v1`` online, and a re-judge later scores eight of them at ``v2``
(three verdicts flip). Batch 1 folds episodes 1-11 with their ``v1`` rewards;
batch 2 folds the ``v2`` re-judgements and a late twelfth episode. Two
checkpoints (a parent and its child) go to the ``checkpoints`` table.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas import new_id
from tests.pipelines.factories import T0, ev

TEST_ADD = {"tests": [{"name": "test_add", "outcome": "failed"}, {"name": "test_sub", "outcome": "passed"}]}
TEST_EDGE = {"tests": [{"name": "test_edge", "outcome": "failed"}]}
LONG_COMPLETION = "think " * 1000  # 6000 characters
REJUDGE_TS = T0 + dt.timedelta(days=1)


@dataclass
class Episode:
    """One episode of the story and the events that make it up."""

    name: str
    task: str
    family: str
    policy: str
    start: dt.datetime
    id: str = field(default_factory=new_id)
    docs: list[dict[str, Any]] = field(default_factory=list)

    def add(self, type_: str, payload: dict[str, Any], *, ts: dt.datetime | None = None) -> Episode:
        seq = len(self.docs)
        self.docs.append(ev(self.id, seq, type_, payload, ts=ts or self.start + dt.timedelta(seconds=seq)))
        return self

    def started(self) -> Episode:
        return self.add(
            "episode_started",
            {
                "task": {"id": self.task, "family": self.family},
                "policy": {"id": "pol", "version": self.policy},
                "group_id": f"g-{self.task}",
            },
        )

    def model(self, completion: str = "let me run the tests") -> Episode:
        return self.add("model_call", {"completion": completion, "prompt_tokens": 10, "completion_tokens": 5})

    def tool(self, exit_code: int | None = 0, stdout: str = "", stderr: str = "", **kw: Any) -> Episode:
        cid = f"c{len(self.docs)}"
        self.add("tool_call", {"call_id": cid, "tool": "bash", "arguments": {"command": "pytest -q"}})
        return self.add(
            "tool_result",
            {
                "call_id": cid,
                "exit_code": exit_code,
                "stdout": {"text": stdout, "size": len(stdout)},
                "stderr": {"text": stderr, "size": len(stderr)},
                **kw,
            },
        )

    def reward(self, verdict: str, evidence: Any = None, flags: list[str] | None = None) -> Episode:
        return self.add(
            "reward",
            {
                "judge_name": "tests",
                "judge_version": "v1",
                "score": 1.0 if verdict == "pass" else 0.0,
                "verdict": verdict,
                "evidence": evidence or {},
                "flags": flags or [],
            },
        )

    def ended(self, status: str, reason: str | None = None) -> Episode:
        return self.add("episode_ended", {"status": status, "num_events": len(self.docs), "reason": reason})

    def rejudged(self, verdict: str, evidence: Any = None) -> dict[str, Any]:
        """A ``v2`` reward written later by a re-judge job (not one of the episode's own steps)."""
        return ev(
            self.id,
            1000,
            "reward",
            {
                "judge_name": "tests",
                "judge_version": "v2",
                "score": 1.0 if verdict == "pass" else 0.0,
                "verdict": verdict,
                "evidence": evidence or {},
                "source": "rejudge",
                "rejudge_run_id": "rj-1",
            },
            ts=REJUDGE_TS,
        )


@dataclass
class Story:
    """The episodes by name, and the Kafka records of each batch."""

    episodes: dict[str, Episode]
    batch1: list[dict[str, Any]]
    batch2: list[dict[str, Any]]

    def id(self, name: str) -> str:
        return self.episodes[name].id

    def ids(self, *names: str) -> list[str]:
        return [self.episodes[n].id for n in names]


def make_story() -> Story:
    def ep(i: int, task: str, family: str, policy: str) -> Episode:
        return Episode(f"e{i}", task, family, policy, T0 + dt.timedelta(minutes=i)).started()

    e = {
        "e1": ep(1, "pyfix-1", "pyfix", "1").model().tool(0, "2 passed").reward("pass").ended("success"),
        "e2": ep(2, "pyfix-1", "pyfix", "1")
        .model()
        .tool(1, "FAILED test_add - AssertionError: assert 3 == 4")
        .reward("fail", TEST_ADD)
        .ended("failure"),
        "e3": ep(3, "pyfix-2", "pyfix", "2")
        .model()
        .tool(1, "FAILED test_add - AssertionError: assert 7 == 8")
        .reward("fail", TEST_ADD)
        .ended("failure"),
        "e4": ep(4, "wp-1", "wordplay", "2")
        .model(LONG_COMPLETION)
        .tool(None, "", "command timed out after 30 s", timed_out=True, error_kind="timeout")
        .reward("fail")
        .ended("failure"),
        "e5": ep(5, "wp-1", "wordplay", "1")
        .model()
        .tool(0, "ok")
        .reward("fail")
        .ended("truncated", "step limit"),
        "e6": ep(6, "pyfix-2", "pyfix", "2")
        .model()
        .add("sandbox", {"action": "crashed", "backend": "local", "sandbox_id": "sb", "detail": "OOM killed"})
        .reward("error")
        .ended("infra_error", "sandbox crashed"),
        "e7": ep(7, "pyfix-1", "pyfix", "2")
        .model()
        .tool(None, "", "missing argument: command", error_kind="invalid_arguments")
        .reward("fail")
        .ended("failure"),
        "e8": ep(8, "wp-2", "wordplay", "1")
        .model()
        .tool(0, "ok")
        .reward("fail", flags=["reward_hack_suspected"])
        .ended("failure"),
        "e9": ep(9, "wp-2", "wordplay", "2").model().tool(0, "ok").reward("pass").ended("success"),
        "e10": ep(10, "wp-1", "wordplay", "1").model(),  # still open
        "e11": ep(11, "pyfix-2", "pyfix", "2")
        .model()
        .tool(
            2, "", "Traceback (most recent call last):\nFileNotFoundError: [Errno 2] No such file: '/w/x.py'"
        )
        .ended("failure"),  # no judge scored it
        "e12": ep(12, "pyfix-2", "pyfix", "2")
        .model()
        .tool(1, "FAILED test_add - AssertionError: assert 1 == 2")
        .reward("fail", TEST_ADD)
        .ended("failure"),
    }
    batch1 = [d for name, x in e.items() if name != "e12" for d in x.docs]
    rejudge = {
        "e1": ("fail", TEST_EDGE),
        "e2": ("pass", None),
        "e3": ("fail", TEST_ADD),
        "e4": ("fail", None),
        "e5": ("fail", None),
        "e7": ("pass", None),
        "e8": ("fail", None),
        "e9": ("pass", None),
    }
    batch2 = [e[n].rejudged(v, evidence) for n, (v, evidence) in rejudge.items()] + e["e12"].docs
    return Story(e, batch1, batch2)


def checkpoint_events(lake: Path) -> list[Any]:
    """A parent checkpoint and its child as events of their control streams (one per story batch)."""
    from learners.checkpoints import CheckpointInfo, Lineage
    from schemas.control import CHECKPOINT, control_event

    events = []
    parent = None
    for i, name in enumerate(("ck-parent", "ck-child")):
        info = CheckpointInfo(
            checkpoint_id=name,
            policy_id="pol",
            backend="torch",
            path=f"/checkpoints/{name}",
            created_at=(T0 + dt.timedelta(hours=i + 1)).isoformat(),
            config={"d_model": 8},
            lineage=Lineage(
                lake_uri=str(lake),
                table_versions={"episodes": 1 + i, "rewards": 1 + i},
                judge_name="tests",
                judge_version=f"v{i + 1}",
                num_samples=10 * (i + 1),
                parent_id=parent,
            ),
        )
        events.append(control_event(CHECKPOINT, info.row(), "learner"))
        parent = name
    return events
