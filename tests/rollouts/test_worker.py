"""The rollout worker loop against a real broker, real sandboxes and real judges."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_events
from ingest.recorder import EpisodeRecorder
from judges import build_judge, load_task
from rollouts import (
    OpenAIChatPolicy,
    RolloutConfig,
    ScriptedPolicy,
    TaskPool,
    ToolAction,
    parse_action,
    run_episode,
    run_rollouts,
)
from rollouts.runner import ROLLOUT_SPEC
from sandboxes import SandboxBackend, SandboxConfig, SandboxPool
from sandboxes.workspace_io import extract_archive
from tests.rollouts.json_reply import send_json
from tests.waiting import wait_until

TASKS = Path(__file__).resolve().parents[2] / "tasks"

pytestmark = pytest.mark.kafka


@pytest.fixture
def recorder(kafka: EmbeddedKafka, topic: str, tmp_path: Path) -> Iterator[EpisodeRecorder]:
    rec = EpisodeRecorder.open(
        bootstrap=kafka.bootstrap, home=tmp_path, worker_id="w", topic=topic, delivery="inline"
    )
    yield rec
    rec.close()


@pytest.fixture
def pool(local_backend: SandboxBackend, base_image: str) -> Iterator[SandboxPool]:
    with SandboxPool(local_backend, ROLLOUT_SPEC, max_size=1) as p:
        yield p


def _events(kafka: EmbeddedKafka, topic: str, episode_id: str) -> list[Any]:
    events = [r.event for r in read_events(kafka.bootstrap, topic, episode_id=episode_id)]
    assert all(e is not None for e in events)
    return events


def test_an_episode_is_recorded_complete_and_in_order(
    kafka: EmbeddedKafka, topic: str, recorder: EpisodeRecorder, pool: SandboxPool, tmp_path: Path
) -> None:
    task = load_task(TASKS / "pyfix" / "pyfix-004")
    policy = ScriptedPolicy([{"bash": "ls"}, "apply_reference", {"bash": "python3 -m pytest -q tests"}])
    out = run_episode(task, policy, pool, recorder, group_id="g1", attempt=2)
    recorder.flush()
    assert out.status == "success" and out.verdict == "pass" and out.steps == 4
    assert out.score is not None and 0.99 < out.score < 1.0  # one step past the free ones costs efficiency
    events = _events(kafka, topic, out.episode_id)
    assert [e.seq for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[0] == "episode_started" and types[-1] == "episode_ended"
    started = events[0].payload
    assert started.task.id == "pyfix-004" and started.group_id == "g1" and started.attempt == 2
    assert types.count("model_call") == 4 and types.count("tool_call") == types.count("tool_result") == 4
    steps = [e.payload for e in events if e.type == "sandbox"]
    # the judge stops what the agent left running without taking a snapshot (a workspace at its
    # entry bound must still be judged), then resets the sandbox to exactly the tree it read, and
    # the episode's record says so
    assert [s.action for s in steps] == ["acquired", "reset", "reset", "released"]
    assert (steps[2].detail or "").startswith("judge: the judged tree")
    reward = next(e.payload for e in events if e.type == "reward")
    assert reward.judge_version == build_judge(task.spec.judge).version and reward.verdict == "pass"
    assert events[-1].payload.status == "success"
    # the final state is archived before the judge runs: the agent's fix is in it
    ref = events[-1].payload.final_state_ref
    assert ref is not None and recorder.blobs is not None
    ws = tmp_path / "final"
    extract_archive(recorder.blobs.get(ref), ws)
    initial = task.initial_dir
    assert initial is not None
    changed = [
        p.relative_to(initial)
        for p in initial.rglob("*.py")
        if p.is_file() and (ws / p.relative_to(initial)).read_bytes() != p.read_bytes()
    ]
    assert changed, "the reference fix is not in the archived final state"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_a_sandbox_killed_mid_episode_is_infra_error_not_a_failure(
    kafka: EmbeddedKafka, topic: str, recorder: EpisodeRecorder, pool: SandboxPool
) -> None:
    task = load_task(TASKS / "pyfix" / "pyfix-004")

    def sleeping_bwraps() -> list[int]:
        """bwrap processes of the leased sandbox whose tree runs the agent's ``sleep 20``."""
        found = []
        for sb in list(pool._in_use.values()):  # the one leased sandbox
            pids = sb[0]._cgroup.procs()  # type: ignore[attr-defined]
            cmdlines = {pid: _cmdline(pid) for pid in pids}
            if any("sleep 20" in c for c in cmdlines.values()):
                found += [pid for pid in pids if _comm(pid) == "bwrap"]
        return found

    def kill_soon() -> None:
        # mid-episode: once the agent's command runs, however long a loaded machine takes to get there
        wait_until(sleeping_bwraps, what="the agent's command running in the sandbox")
        for pid in sleeping_bwraps():
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill_soon, daemon=True).start()
    out = run_episode(task, ScriptedPolicy([{"bash": "sleep 20"}]), pool, recorder)
    recorder.flush()
    assert out.status == "infra_error" and out.verdict is None and "SandboxCrashedError" in (out.error or "")
    events = _events(kafka, topic, out.episode_id)
    assert not [e for e in events if e.type == "reward"], "a crashed sandbox must never yield a reward"
    assert "crashed" in [e.payload.action for e in events if e.type == "sandbox"]
    assert events[-1].type == "episode_ended" and events[-1].payload.status == "infra_error"


def test_the_step_limit_truncates_but_still_judges(
    kafka: EmbeddedKafka, topic: str, recorder: EpisodeRecorder, pool: SandboxPool, tmp_path: Path
) -> None:
    dest = tmp_path / "pyfix" / "short"
    shutil.copytree(TASKS / "pyfix" / "pyfix-004", dest)
    shutil.copy(TASKS / "pyfix" / "family.yaml", dest.parent / "family.yaml")
    spec = yaml.safe_load((dest / "task.yaml").read_text())
    spec["limits"] = {"max_steps": 2, "time_limit_s": 60}
    (dest / "task.yaml").write_text(yaml.safe_dump(spec))
    out = run_episode(load_task(dest), ScriptedPolicy([{"bash": "ls"}] * 5), pool, recorder)
    recorder.flush()
    assert out.status == "truncated" and out.steps == 2 and out.verdict == "fail"
    events = _events(kafka, topic, out.episode_id)
    assert [e.type for e in events][-2:] == ["reward", "episode_ended"]
    assert "step limit" in (events[-1].payload.reason or "")


def test_worker_processes_each_record_their_episodes(
    kafka: EmbeddedKafka,
    topic: str,
    local_backend: SandboxBackend,
    sandbox_config: SandboxConfig,
    tmp_path: Path,
) -> None:
    pool = TaskPool([TASKS / "pyfix"], ids=["pyfix-001", "pyfix-004", "pyfix-012"])
    import random

    assignments = pool.sample(3, 2, rng=random.Random(1))
    cfg = RolloutConfig(
        bootstrap=kafka.bootstrap,
        home=str(tmp_path),
        topic=topic,
        policy_factory="trajlake.policy_specs:make_policy",
        policy_spec="scripted:reference",
        sandbox_config=sandbox_config,
        workers=2,
    )
    outcomes = run_rollouts(cfg, assignments)
    assert len(outcomes) == 6 and {o.status for o in outcomes} == {"success"}
    groups = {o.group_id for o in outcomes}
    assert len(groups) == 3  # G=2 attempts share a group
    workers = set()
    for o in outcomes:
        events = _events(kafka, topic, o.episode_id)
        assert [e.seq for e in events] == list(range(len(events)))
        workers.add(events[0].producer.worker_id)
    assert len(workers) == 2


class _ChatServer(BaseHTTPRequestHandler):
    replies: list[str] = []
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        text = type(self).replies[min(len(type(self).requests) - 1, len(type(self).replies) - 1)]
        # vLLM's shapes (see chat_fixtures/README.md): token_id:<id> strings, the choice's token_ids
        # and the response's prompt_token_ids when return_token_ids is asked for
        tokens = [{"token": f"token_id:{100 + i}", "logprob": -0.1 * (i + 1)} for i in range(8)]
        choice = {"message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                  "logprobs": {"content": tokens}}  # fmt: skip
        reply: dict[str, Any] = {"model": body["model"], "choices": [choice]}
        if body.get("return_token_ids"):
            choice["token_ids"] = list(range(100, 108))
            reply["prompt_token_ids"] = list(range(7, 7 + 2 * len(body["messages"])))
        send_json(self, reply)

    def log_message(self, *args: Any) -> None:
        pass


def test_openai_compatible_policy_records_logprobs(
    kafka: EmbeddedKafka, topic: str, recorder: EpisodeRecorder, pool: SandboxPool
) -> None:
    _ChatServer.replies = ["Let me look.\n```bash\ncat README.md\n```", "submit"]
    _ChatServer.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        policy = OpenAIChatPolicy(
            f"http://127.0.0.1:{server.server_port}/v1",
            "test-model",
            temperature=0.2,
            logprob_semantics="processed",
        )
        out = run_episode(load_task(TASKS / "pyfix" / "pyfix-004"), policy, pool, recorder)
    finally:
        server.shutdown()
    recorder.flush()
    assert out.status == "failure" and out.steps == 2  # looked, then submitted without fixing
    calls = [e.payload for e in _events(kafka, topic, out.episode_id) if e.type == "model_call"]
    assert calls[0].completion.startswith("Let me look") and calls[0].model == "test-model"
    assert calls[0].completion_token_ids == list(range(100, 108))
    assert calls[0].prompt_token_ids == list(range(7, 11))  # as the server returned them, not re-tokenised
    assert calls[0].completion_logprobs[0] == pytest.approx(-0.1)
    # this server's second prompt does not begin with the first prompt and completion: a broken
    # history, recorded on the call and counted in the outcome
    assert [c.history_break for c in calls] == [False, True]
    assert (out.model_calls, out.history_breaks) == (2, 1)
    assert calls[0].served_by.kind == "vllm" and calls[0].served_by.logprob_semantics == "processed"
    assert calls[0].sampling["top_k"] == -1 and calls[0].sampling["temperature"] == 0.2
    second = _ChatServer.requests[1]["messages"]
    assert second[-1]["role"] == "user" and "[bash exit=0]" in second[-1]["content"]  # the observation
    assert _ChatServer.requests[0]["logprobs"] is True and _ChatServer.requests[0]["temperature"] == 0.2
    assert _ChatServer.requests[0]["return_token_ids"] is True


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("```bash\nls -la\n```", ToolAction("bash", {"command": "ls -la"})),
        ('{"tool": "write_file", "arguments": {"path": "a", "content": "b"}}',
         ToolAction("write_file", {"path": "a", "content": "b"})),
        ("submit", ToolAction("submit")),
        ("I think the bug is in line 3.", None),
    ],
)  # fmt: skip
def test_actions_are_read_from_completions(text: str, action: ToolAction | None) -> None:
    assert parse_action(text) == action
