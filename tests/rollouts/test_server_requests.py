"""What the chat policy actually puts on the wire, and which served weights it records.

A fake OpenAI-compatible server runs in this process (``http.server`` in a thread): it records
every request body and answers in the shapes vLLM and SGLang send (``chat_fixtures/`` for the chat
route; the completions route with ``return_token_ids``; SGLang's ``/generate`` with ``meta_info``),
and serves ``/v1/models`` the way vLLM does (``root``: the path of the loaded weights). The tests
read the bodies the server received, not what the client says it would send, so each fails if the
client stops sending one sampling parameter, and they follow the served weights' version from the
server (or the spec, or a file) into the recorded ``episode_started`` and ``model_call`` events and
the sample rows the learner reads; then, on a real broker and lake, through the rollout worker and
into a learner step whose ``max_policy_lag`` admits or leaves out server episodes by their place
along the parent's lineage.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fold import fold_episode
from fold.samples import sample_rows
from ingest import EpisodeRecorder, MemorySink
from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_events
from judges import load_task
from judges.tasks import Task
from learners.checkpoints import Lineage, load_checkpoint, publish_checkpoint, save_checkpoint
from learners.trainer import TrainArgs, TrainResult, supervised_warm_start, train
from pipelines import PipelineConfig, run_once
from rollouts import run_episode
from rollouts.policies import ModelCall, OpenAIChatPolicy, Policy
from rollouts.runner import ROLLOUT_SPEC
from sandboxes import SandboxBackend, SandboxPool
from schemas import parse_event
from schemas.events import PolicyRef, RewardPayload
from tests.rollouts.json_reply import send_json
from tests.rollouts.tiny_chat import chat_tokenizer
from trajlake.policy_specs import make_policy

TASK = Path(__file__).resolve().parents[2] / "tasks" / "wordplay" / "wordplay-001"
FIXTURES = Path(__file__).with_name("chat_fixtures")
MODEL = "tiny-agent"
COMPLETION_IDS = [17, 18, 2]
COMPLETION_LOGPROBS = [-0.25, -0.5, -0.125]

# every parameter away from its neutral value (and from vLLM's and SGLang's defaults), so a client
# that left one out, or sent its default instead, fails on that parameter's name
SAMPLING: dict[str, float | int] = {
    "top_p": 0.9, "top_k": 20, "min_p": 0.05, "presence_penalty": 0.25, "frequency_penalty": 0.125,
    "repetition_penalty": 1.1,
}  # fmt: skip
TEMPERATURE, MAX_TOKENS, SEED = 0.7, 333, 5
SENT: dict[str, float | int] = {
    "temperature": TEMPERATURE,
    **SAMPLING,
    "max_tokens": MAX_TOKENS,
    "seed": SEED,
}
"""Every sampling parameter the client must send to vLLM, with its value."""
OPENAI_CHAT_FIELDS = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "max_tokens")
"""The sampling fields of OpenAI's own chat completion request (platform.openai.com API reference)."""


@dataclass
class FakeServer:
    """What the fake server was asked, and what it serves."""

    base_url: str
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """``(path, JSON body)`` of every POST, in order."""
    models_root: str = "/srv/models/tiny"
    """The ``root`` ``/v1/models`` reports: the path the server loaded its weights from."""
    gets: list[str] = field(default_factory=list)
    prompt_ids: list[int] | None = None
    """The chat reply's ``prompt_token_ids`` (``None``: the recorded fixture's)."""

    def bodies(self, path: str) -> list[dict[str, Any]]:
        """The bodies POSTed to ``path``."""
        return [b for p, b in self.requests if p == path]


def _chat_reply(body: dict[str, Any], prompt_ids: list[int] | None = None) -> dict[str, Any]:
    """vLLM's chat completion with ``return_token_ids`` (the recorded fixture), saying ``submit``."""
    reply = json.loads((FIXTURES / "vllm_return_token_ids.json").read_text())
    if prompt_ids is not None:
        reply["prompt_token_ids"] = prompt_ids
    choice = reply["choices"][0]
    choice["message"]["content"] = "submit"
    choice["token_ids"] = COMPLETION_IDS
    choice["logprobs"]["content"] = [
        {"token": f"token_id:{i}", "logprob": lp, "bytes": [], "top_logprobs": []}
        for i, lp in zip(COMPLETION_IDS, COMPLETION_LOGPROBS, strict=True)
    ]
    reply["model"] = body["model"]
    return reply  # type: ignore[no-any-return]


def _completion_reply(body: dict[str, Any]) -> dict[str, Any]:
    """vLLM's ``/v1/completions`` with ``return_token_ids`` and ``return_tokens_as_token_ids``."""
    return {
        "id": "cmpl-1", "object": "text_completion", "created": 1764590000, "model": body["model"],
        "choices": [{
            "index": 0, "text": "submit", "finish_reason": "stop", "stop_reason": None,
            "prompt_token_ids": body["prompt"], "token_ids": COMPLETION_IDS,
            "logprobs": {"tokens": [f"token_id:{i}" for i in COMPLETION_IDS],
                         "token_logprobs": COMPLETION_LOGPROBS, "text_offset": [0, 3, 6],
                         "top_logprobs": [None, None, None]},
        }],
        "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": 3, "total_tokens": 0},
    }  # fmt: skip


def _generate_reply(body: dict[str, Any]) -> dict[str, Any]:
    """SGLang's native ``/generate`` with ``return_logprob``: ``[logprob, id, text]`` per token."""
    pairs = zip(COMPLETION_IDS, COMPLETION_LOGPROBS, strict=True)
    return {
        "text": "submit", "output_ids": COMPLETION_IDS,
        "meta_info": {"id": "r1", "prompt_tokens": len(body["input_ids"]), "completion_tokens": 3,
                      "finish_reason": {"type": "stop", "matched": 2},
                      "output_token_logprobs": [[lp, i, None] for i, lp in pairs]},
    }  # fmt: skip


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A fake vLLM/SGLang server on a free loopback port, recording every request."""
    state: FakeServer | None = None

    class Handler(BaseHTTPRequestHandler):
        def _send(self, doc: Any, status: int = 200) -> None:
            send_json(self, doc, status)

        def do_GET(self) -> None:  # noqa: N802
            assert state is not None
            state.gets.append(self.path)
            if self.path == "/v1/models":
                self._send({"object": "list", "data": [{
                    "id": MODEL, "object": "model", "created": 1764590000, "owned_by": "vllm",
                    "root": state.models_root, "parent": None, "max_model_len": 2048,
                }]})  # fmt: skip
            elif self.path == "/version":
                self._send({"version": "0.11.0"})
            else:
                self._send({"detail": "Not Found"}, 404)

        def do_POST(self) -> None:  # noqa: N802
            assert state is not None
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append((self.path, body))
            if self.path == "/v1/chat/completions":
                self._send(_chat_reply(body, state.prompt_ids))
            elif self.path == "/v1/completions":
                self._send(_completion_reply(body))
            elif self.path == "/generate":
                self._send(_generate_reply(body))
            else:
                self._send({"detail": "Not Found"}, 404)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = FakeServer(base_url=f"http://127.0.0.1:{httpd.server_port}/v1")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(TASK)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tokenizer")
    chat_tokenizer(out, "Write the word reversed into answer.txt with bash, then submit.", vocab_size=300)
    return out


def _policy(fake: FakeServer, **kw: Any) -> OpenAIChatPolicy:
    return OpenAIChatPolicy(
        fake.base_url, MODEL, temperature=TEMPERATURE, max_tokens=MAX_TOKENS, seed=SEED,
        sampling=dict(SAMPLING), logprob_semantics="processed", **kw,
    )  # fmt: skip


def _one_call(policy: Policy, task: Task) -> ModelCall:
    policy.begin(task)
    call = policy.step(None).model_call
    assert call is not None
    return call


def _first_prompt(policy: OpenAIChatPolicy, task: Task) -> list[int]:
    """The ids the task's first prompt renders to with the policy's own chat template."""
    assert policy.tokens is not None
    system = {"role": "system", "content": policy.system_prompt}
    return policy.tokens.prompt([system, {"role": "user", "content": task.spec.instruction}])


def _sent(body: dict[str, Any], expected: dict[str, Any], names: dict[str, str] | None = None) -> None:
    """Each of ``expected`` is in ``body``, with its value (under the route's own ``names``)."""
    for name, value in expected.items():
        key = (names or {}).get(name, name)
        assert key in body, f"{key} was not sent: the server would apply its own default"
        assert body[key] == value, key


# ------------------------------------------------------------------ request bodies


def test_vllm_chat_requests_carry_every_sampling_parameter(server: FakeServer, task: Task) -> None:
    policy = _policy(server)
    try:
        call = _one_call(policy, task)
    finally:
        policy.close()
    [body] = server.bodies("/v1/chat/completions")
    _sent(body, SENT)
    assert body["model"] == MODEL and body["logprobs"] is True
    assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    assert body["messages"][-1] == {"role": "user", "content": task.spec.instruction}
    # recorded as sent, and the reply's ids and log-probs as returned
    assert call.sampling == SENT
    assert (call.completion_token_ids, call.completion_logprobs) == (COMPLETION_IDS, COMPLETION_LOGPROBS)


def test_any_other_openai_server_gets_openais_fields_only(server: FakeServer, task: Task) -> None:
    policy = _policy(server, server="openai")
    try:
        call = _one_call(policy, task)
    finally:
        policy.close()
    [body] = server.bodies("/v1/chat/completions")
    expected = {k: v for k, v in SENT.items() if k in OPENAI_CHAT_FIELDS}
    _sent(body, expected)
    assert set(body) == {"model", "messages", "logprobs", *expected}  # nothing a server may refuse
    assert call.sampling == expected


def test_token_in_out_on_vllm_sends_the_prompt_as_ids_with_every_sampling_parameter(
    server: FakeServer, task: Task, tokenizer_dir: Path
) -> None:
    policy = _policy(server, tokenizer=str(tokenizer_dir))
    try:
        call = _one_call(policy, task)
        expected_prompt = _first_prompt(policy, task)
        second = policy.step("[bash exit=0]\nok").model_call
    finally:
        policy.close()
    assert not server.bodies("/v1/chat/completions")
    first_body, second_body = server.bodies("/v1/completions")
    assert first_body["prompt"] == expected_prompt and all(isinstance(i, int) for i in expected_prompt)
    for body in (first_body, second_body):
        _sent(body, SENT)
        assert body["model"] == MODEL and body["logprobs"] == 1
        assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    # the second prompt continues the exact history: first prompt + the completion's ids as returned
    assert second_body["prompt"][: len(expected_prompt) + 3] == expected_prompt + COMPLETION_IDS
    assert call.prompt_token_ids == expected_prompt and call.completion_token_ids == COMPLETION_IDS
    assert second is not None and not second.history_break and call.sampling == SENT


def test_token_in_out_on_sglang_sends_input_ids_and_every_sampling_parameter(
    server: FakeServer, task: Task, tokenizer_dir: Path
) -> None:
    policy = _policy(server, server="sglang", tokenizer=str(tokenizer_dir))
    try:
        call = _one_call(policy, task)
        expected_prompt = _first_prompt(policy, task)
    finally:
        policy.close()
    [body] = server.bodies("/generate")  # SGLang's native route, at the server's root
    assert not server.bodies("/v1/completions") and not server.bodies("/v1/chat/completions")
    assert body["input_ids"] == expected_prompt
    assert body["return_logprob"] is True  # without it /generate sends no log-probs
    # SGLang's names: max_new_tokens and sampling_seed
    _sent(body["sampling_params"], SENT, {"max_tokens": "max_new_tokens", "seed": "sampling_seed"})
    assert (call.completion_token_ids, call.completion_logprobs) == (COMPLETION_IDS, COMPLETION_LOGPROBS)
    assert call.served_by is not None and call.served_by["kind"] == "sglang"


# ------------------------------------------------------------------ served weights


def _record(policy: Policy, task: Task, sink: MemorySink, home: Path) -> str:
    """One episode the way the rollout worker records it: sync, episode_started, one model call."""
    rec = EpisodeRecorder.open(bootstrap="127.0.0.1:1", home=home, worker_id="w", sink=sink)
    try:
        policy.sync()  # what run_episode does before it opens the episode
        with rec.episode(
            task=task.ref,
            policy=PolicyRef(id=policy.policy_id, version=policy.policy_version),
            sampling=policy.sampling or None,
        ) as ep:
            ep.model_call(**_one_call(policy, task).event_fields())
            ep.end("success")
        return ep.episode_id
    finally:
        rec.close()


def _recorded(sink: MemorySink, episode_id: str) -> tuple[str, list[str | None], list[str | None]]:
    """An episode's policy version, its calls' ``served_by.weights_version``, its sample rows' versions."""
    events = [e for e in (parse_event(v) for _, _, v in sink.records) if e.episode_id == episode_id]
    [started] = [e for e in events if e.type == "episode_started"]
    calls = [e.payload for e in events if e.type == "model_call"]
    assert all(c.served_by is not None for c in calls)
    weights = [c.served_by.weights_version for c in calls if c.served_by is not None]
    rows = sample_rows(fold_episode(episode_id, events))
    return started.payload.policy.version, weights, [r["policy_version"] for r in rows]


def test_weights_named_in_the_spec_are_the_episodes_policy_version(
    server: FakeServer, task: Task, tmp_path: Path
) -> None:
    policy = make_policy(
        f"openai:{server.base_url}#{MODEL}?logprobs=processed&weights=agent-20261204T090000-c0ffee"
    )
    sink = MemorySink()
    try:
        eid = _record(policy, task, sink, tmp_path)
    finally:
        policy.close()
    assert _recorded(sink, eid) == (
        "agent-20261204T090000-c0ffee", ["agent-20261204T090000-c0ffee"], ["agent-20261204T090000-c0ffee"],
    )  # fmt: skip
    assert "/v1/models" not in server.gets  # named: the server is not asked


def test_a_weights_file_is_read_again_for_every_episode(
    server: FakeServer, task: Task, tmp_path: Path
) -> None:
    pushed = tmp_path / "served-weights"
    pushed.write_text("agent-20261204T090000-aaaaaa\n")
    policy = make_policy(f"openai:{server.base_url}#{MODEL}?logprobs=processed&weights_file={pushed}")
    sink = MemorySink()
    try:
        first = _record(policy, task, sink, tmp_path / "home")
        pushed.write_text("agent-20261204T093000-bbbbbb\n")  # new weights pushed between two episodes
        second = _record(policy, task, sink, tmp_path / "home")
    finally:
        policy.close()
    old, new = "agent-20261204T090000-aaaaaa", "agent-20261204T093000-bbbbbb"
    assert _recorded(sink, first) == (old, [old], [old])
    assert _recorded(sink, second) == (new, [new], [new])


def test_a_weights_file_that_is_not_text_is_a_policy_outage_in_one_sentence(
    server: FakeServer, tmp_path: Path
) -> None:
    from rollouts import PolicyUnavailableError

    pushed = tmp_path / "served-weights"
    pushed.write_bytes(b"\xff\xfe\x00binary")
    policy = make_policy(f"openai:{server.base_url}#{MODEL}?logprobs=processed&weights_file={pushed}")
    try:
        with pytest.raises(PolicyUnavailableError, match="not UTF-8 text"):
            policy.sync()  # (an InfraError: run_episode ends the episode infra_error, the worker goes on)
    finally:
        policy.close()


def test_without_a_setting_the_checkpoint_id_in_the_served_path_is_the_policy_version(
    server: FakeServer, task: Task, tmp_path: Path
) -> None:
    """vLLM's ``/v1/models`` gives the served model's ``root``: the directory its weights came from."""
    server.models_root = "/srv/checkpoints/agent-20261204T090000-0a1b2c/hf"
    policy = make_policy(f"openai:{server.base_url}#{MODEL}?logprobs=processed")
    sink = MemorySink()
    try:
        first = _record(policy, task, sink, tmp_path)
        server.models_root = "/srv/checkpoints/agent-20261204T093000-3d4e5f/hf"  # the server reloaded
        second = _record(policy, task, sink, tmp_path)
    finally:
        policy.close()
    old, new = "agent-20261204T090000-0a1b2c", "agent-20261204T093000-3d4e5f"
    assert _recorded(sink, first) == (old, [old], [old])
    assert _recorded(sink, second) == (new, [new], [new])
    assert server.gets.count("/v1/models") == 2  # asked before each episode


@pytest.mark.kafka
def test_the_rollout_worker_stamps_each_episode_with_the_checkpoint_served_then(
    server: FakeServer, task: Task, kafka: EmbeddedKafka, topic: str, tmp_path: Path,
    local_backend: SandboxBackend, base_image: str,
) -> None:  # fmt: skip
    """``run_episode`` asks the policy what it serves before it opens each episode."""
    policy = make_policy(f"openai:{server.base_url}#{MODEL}?logprobs=processed")
    rec = EpisodeRecorder.open(bootstrap=kafka.bootstrap, home=tmp_path, worker_id="w", topic=topic,
                               delivery="inline")  # fmt: skip
    served = ("agent-20261204T090000-0a1b2c", "agent-20261204T093000-3d4e5f")
    outcomes = []
    try:
        with SandboxPool(local_backend, ROLLOUT_SPEC, max_size=1) as pool:
            for ckpt in served:
                server.models_root = f"/srv/checkpoints/{ckpt}/hf"  # the server reloaded between episodes
                outcomes.append(run_episode(task, policy, pool, rec))
        rec.flush()
    finally:
        rec.close()
        policy.close()
    for out, ckpt in zip(
        outcomes, ("agent-20261204T090000-0a1b2c", "agent-20261204T093000-3d4e5f"), strict=True
    ):
        assert out.status == "failure" and out.model_calls == 1 and out.policy_version == ckpt
        events = [r.event for r in read_events(kafka.bootstrap, topic, episode_id=out.episode_id)]
        assert events[0] is not None and events[0].type == "episode_started"
        assert events[0].payload.policy.version == ckpt
        [call] = [e.payload for e in events if e is not None and e.type == "model_call"]
        assert call.served_by is not None and call.served_by.weights_version == ckpt


@pytest.mark.kafka
def test_an_unreadable_weights_file_ends_the_episode_as_infra_error_without_raising(
    server: FakeServer, task: Task, kafka: EmbeddedKafka, topic: str, tmp_path: Path,
    local_backend: SandboxBackend, base_image: str,
) -> None:  # fmt: skip
    missing = tmp_path / "never-written"
    policy = make_policy(f"openai:{server.base_url}#{MODEL}?logprobs=processed&weights_file={missing}")
    rec = EpisodeRecorder.open(bootstrap=kafka.bootstrap, home=tmp_path, worker_id="w", topic=topic,
                               delivery="inline")  # fmt: skip
    try:
        with SandboxPool(local_backend, ROLLOUT_SPEC, max_size=1) as pool:
            out = run_episode(task, policy, pool, rec)
        rec.flush()
    finally:
        rec.close()
        policy.close()
    assert out.status == "infra_error" and "PolicyUnavailableError" in (out.error or "")


# ------------------------------------------------------------------ policy lag along the lineage


@pytest.mark.kafka
def test_server_rollouts_are_admitted_by_policy_lag_along_the_lineage(
    server: FakeServer, task: Task, kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    """Episodes a server sampled carry the served checkpoint's id, so ``max_policy_lag`` can tell
    how far behind the learner's parent each one is: within the bound trained, beyond it (or off
    the lineage) left out whole and counted, never all dropped as version ``"0"``."""
    topic = f"t.server-lag.{random.getrandbits(32):08x}"
    learner = f"{topic}.learner"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2, learner: 1}).ensure_topics()
    lake = str(tmp_path / "lake")
    cfg = PipelineConfig(bootstrap=kafka.bootstrap, lake_root=lake, topics=(topic, learner),
                         control_topics={"checkpoint": learner})  # fmt: skip
    # a lineage c0 <- c1 <- c2: the learner's next step starts from c2
    c0 = supervised_warm_start(
        [("Write sun reversed.\n", "nus")], checkpoint_root=str(tmp_path / "ckpt"), steps=2
    )
    _, model_cfg, weights = load_checkpoint(c0.path)
    chain = [c0]
    for _ in range(2):
        chain.append(save_checkpoint(
            tmp_path / "ckpt", policy_id=c0.policy_id, backend="torch", config=model_cfg, weights=weights,
            lineage=Lineage(lake_uri="", table_versions={}, judge_name=None, judge_version=None,
                            num_samples=0, parent_id=chain[-1].checkpoint_id, note="a pushed step"),
        ))  # fmt: skip
    for info in chain:
        publish_checkpoint(kafka.bootstrap, learner, info)
    c0, c1, c2 = chain

    # the server serves each checkpoint in turn (vLLM's /v1/models names the directory it loaded),
    # and weights from outside the lineage last; two episodes a group, one passing, one failing
    server.prompt_ids = [1, 5, 6, 7]  # within the tiny model's vocabulary
    policy = make_policy(f"openai:{server.base_url}#{MODEL}?logprobs=processed")
    rec = EpisodeRecorder.open(bootstrap=kafka.bootstrap, home=tmp_path, worker_id="w", topic=topic,
                               delivery="inline")  # fmt: skip
    served = {
        "lag0": f"{c2.path}/hf",
        "lag1": f"{c1.path}/hf",
        "lag2": f"{c0.path}/hf",
        "off": "/srv/models/other",
    }
    versions: dict[str, str] = {}
    try:
        for group, root in served.items():
            server.models_root = root
            for verdict in ("pass", "fail"):
                policy.sync()  # as run_episode does before it opens the episode
                ref = PolicyRef(id=policy.policy_id, version=policy.policy_version)
                with rec.episode(task=task.ref, policy=ref, group_id=group, sampling=policy.sampling) as ep:
                    ep.model_call(**_one_call(policy, task).event_fields())
                    ep.record_reward(RewardPayload(judge_name="tests", judge_version="v1", verdict=verdict,
                                                   score=1.0 if verdict == "pass" else 0.0))  # fmt: skip
                    ep.end("success" if verdict == "pass" else "failure")
                versions[group] = policy.policy_version
        rec.flush()
    finally:
        rec.close()
        policy.close()
    assert versions == {"lag0": c2.checkpoint_id, "lag1": c1.checkpoint_id, "lag2": c0.checkpoint_id,
                        "off": "/srv/models/other"}  # fmt: skip
    run_once(cfg)

    def step(max_lag: int | None) -> TrainResult:
        return train(TrainArgs(lake=lake, checkpoint_root=str(tmp_path / "ckpt"), judge_name="tests",
                               parent=c2.path, max_policy_lag=max_lag, epochs=1, batch_size=8))  # fmt: skip

    bounded = step(1)
    assert bounded.checkpoint is not None and bounded.samples == 4  # lag 0 and lag 1, both whole groups
    metrics = bounded.checkpoint.lineage.metrics
    assert metrics["policy_lag"] == {"0": 2, "1": 2, "2": 2, "unknown": 2}
    assert metrics["samples_excluded"]["policy_lag"] == 4  # lag 2 and the weights off the lineage
    unbounded = step(None)
    assert unbounded.checkpoint is not None and unbounded.samples == 8
    assert "policy_lag" not in unbounded.checkpoint.lineage.metrics["samples_excluded"]
