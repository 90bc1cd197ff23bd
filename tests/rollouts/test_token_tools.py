"""Token in/out with native tool calling, and reasoning, against a stand-in vLLM / SGLang server.

The tokenizer and its chat template (Qwen2.5's way with tools: schemas in the system turn,
``<tool_call>`` blocks, ``<tool_response>`` turns, ``<think>`` reasoning) are built in the test
(``tiny_chat``). The server is a real HTTP server in the test that answers vLLM's
``/v1/completions`` and SGLang's ``/generate`` in their shapes: it "samples" scripted texts,
encoded with the same tokenizer, so the client's token history can be compared with what the
template renders for the whole conversation. What a real vLLM does with the same client is in
``test_vllm_server.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ingest import EpisodeRecorder, MemorySink
from judges import load_task
from pipelines import fold_episode
from rollouts.errors import PolicySpecError
from rollouts.policies import (
    TOOL_SCHEMAS,
    ChatTokens,
    ModelCall,
    OpenAIChatPolicy,
    PolicyStep,
    ToolAction,
    parse_tool_call_blocks,
    split_reasoning,
)
from schemas import parse_event
from tests.rollouts.json_reply import send_json
from tests.rollouts.tiny_chat import chat_tokenizer

CORPUS = (
    'Write the word reversed into answer.txt. <tool_call>{"name": "bash", "arguments": {"command": "ls"}}'
    "</tool_call> <tool_response> <think> look first </think> submit read_file write_file"
)
CALL_LS = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
TASK = Path(__file__).resolve().parents[2] / "tasks" / "wordplay" / "wordplay-001"
SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'


class _Server(BaseHTTPRequestHandler):
    """vLLM's ``/v1/completions``, SGLang's ``/generate`` and vLLM's ``/v1/chat/completions`` (with a
    reasoning parser: ``reasoning`` says the message's field), sampling the scripted ``replies`` in turn."""

    tok: Any = None
    replies: list[str] = []
    requests: list[dict[str, Any]] = []
    reasoning = "reasoning_content"

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        cls.requests.append({"path": self.path, **body})
        text = cls.replies[min(len(cls.requests), len(cls.replies)) - 1]
        ids = [*cls.tok.encode(text, add_special_tokens=False), cls.tok.eos_token_id]  # stopped on <|im_end|>
        logprobs = [-0.01 * (i + 1) for i in range(len(ids))]
        if self.path.endswith("/chat/completions"):  # the reasoning parser split the think block off
            thought, answer = split_reasoning(text)
            message = {"role": "assistant", "content": answer, cls.reasoning: thought}
            content = [{"token": f"token_id:{i}", "logprob": lp} for i, lp in zip(ids, logprobs, strict=True)]
            choice = {"message": message, "finish_reason": "stop", "logprobs": {"content": content},
                      "token_ids": ids}  # fmt: skip
            reply: dict[str, Any] = {
                "model": body["model"],
                "choices": [choice],
                "prompt_token_ids": [1, 2, 3],
            }
        elif self.path == "/generate":  # SGLang: meta_info.output_token_logprobs is [logprob, id, text]
            prompt = body["input_ids"]
            entries = [[lp, i, None] for lp, i in zip(logprobs, ids, strict=True)]
            reply = {
                "text": text, "output_ids": ids,
                "meta_info": {"output_token_logprobs": entries, "prompt_tokens": len(prompt),
                              "finish_reason": {"type": "stop"}},
            }  # fmt: skip
        else:  # vLLM: the choice's token_ids and prompt_token_ids with return_token_ids
            lp = {"token_logprobs": logprobs, "tokens": [f"token_id:{i}" for i in ids]}
            choice = {"text": text, "token_ids": ids, "prompt_token_ids": body["prompt"],
                      "finish_reason": "stop", "logprobs": lp}  # fmt: skip
            reply = {"model": body["model"], "choices": [choice]}
        send_json(self, reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tok")
    chat_tokenizer(out, CORPUS, vocab_size=400)
    return out


@pytest.fixture
def server(tokenizer_dir: Path) -> Iterator[str]:
    """The server's ``.../v1`` (its script set by each test through ``_Server.replies``)."""
    from transformers import AutoTokenizer

    _Server.tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    _Server.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/v1"
    finally:
        httpd.shutdown()


def _record(calls: list[ModelCall], tmp_path: Path) -> list[Any]:
    """The calls recorded as an episode's events (through the recorder, as the worker records them)."""
    sink = MemorySink()
    rec = EpisodeRecorder.open(bootstrap="127.0.0.1:1", home=tmp_path, worker_id="t", sink=sink)
    with rec.episode(task={"id": "t1"}, policy={"id": "p"}, sampling={"temperature": 1.0}) as ep:
        for c in calls:
            ep.model_call(**c.event_fields())
        ep.end("success")
    rec.close()
    return [parse_event(v) for _, _, v in sink.records]


def _prompt(request: dict[str, Any]) -> list[int]:
    return list(request["input_ids"] if request["path"] == "/generate" else request["prompt"])


def _converse(policy: OpenAIChatPolicy, replies: list[str], *observations: str) -> list[PolicyStep]:
    """The policy's steps on the task while the server samples ``replies``: its first, then one per
    observation (the policy is closed after)."""
    _Server.replies = replies
    try:
        policy.begin(load_task(TASK))
        return [policy.step(None), *(policy.step(o) for o in observations)]
    finally:
        policy.close()


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_token_in_out_with_tools_renders_the_schemas_reads_hermes_calls_and_answers_with_tool_turns(
    kind: str, server: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    policy = OpenAIChatPolicy(server, "tiny", server=kind, native_tools=True, tokenizer=str(tokenizer_dir),
                              logprob_semantics="processed", system_prompt="Use the tools.")  # fmt: skip
    tokens = ChatTokens(tokenizer_dir, tools=TOOL_SCHEMAS)
    first, second = _converse(policy, ["Let me look." + CALL_LS, SUBMIT], "[bash exit=0]\nanswer.txt")
    # the tool schemas went through the chat template into the prompt, as the server would render them
    sent = [_prompt(r) for r in _Server.requests]
    assert '"name": "write_file"' in tokens.tok.decode(sent[0]) and sent[0] == tokens.render(
        [{"role": "system", "content": "Use the tools."},
         {"role": "user", "content": load_task(TASK).spec.instruction}], add_generation_prompt=True,
    )  # fmt: skip
    # the Hermes block is the native tool call, with an id, and the content is the text before it
    assert first.action == ToolAction("bash", {"command": "ls"})
    assert first.model_call is not None and first.model_call.completion == "Let me look."
    ls = {"id": "call-0", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    assert first.model_call.tool_calls == [ls]
    assert second.action == ToolAction("submit") and second.model_call is not None
    assert second.model_call.tool_calls == [
        {"id": "call-1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
    ]
    # the tool output is a `tool` turn answering the call, and the history only grew by appending:
    # the second prompt is the first, the exact completion ids, then the template's tool turn; it is
    # what the template renders for the whole conversation
    assert policy.messages[3] == {
        "role": "tool",
        "content": "[bash exit=0]\nanswer.txt",
        "tool_call_id": "call-0",
    }
    completion = first.model_call.completion_token_ids or []
    assert sent[1][: len(sent[0]) + len(completion)] == sent[0] + completion
    assert sent[1] == tokens.render(policy.messages[:4], add_generation_prompt=True)
    assert "<tool_response>\n[bash exit=0]" in tokens.tok.decode(sent[1][len(sent[0]) :])
    if kind == "vllm":  # the tags are kept in the text, as vLLM's hermes parser asks
        assert _Server.requests[0]["skip_special_tokens"] is False
    else:
        assert _Server.requests[0]["sampling_params"]["skip_special_tokens"] is False
    # recorded as the chat path records native calls: on the call, and on the assistant turn next prompt
    events = _record([first.model_call, second.model_call], tmp_path)
    recorded = [e for e in events if e.type == "model_call"]
    assert recorded[0].payload.tool_calls == [ls] and recorded[1].payload.messages[2].tool_calls == [ls]
    assert recorded[1].payload.messages[3].tool_call_id == "call-0"
    from fold.samples import sample_rows

    [row] = sample_rows(fold_episode(events[0].episode_id, events))
    assert (row["start"], row["num_calls"], row["problem"]) == ("episode", 2, None)  # one sequence
    replies = json.loads(row["response_messages"])
    assert [m["role"] for m in replies] == ["assistant", "tool", "assistant"]
    assert replies[0]["tool_calls"] == [ls] and replies[1]["tool_call_id"] == "call-0"
    assert replies[2]["tool_calls"][0]["function"]["name"] == "submit"


def test_a_malformed_tool_call_block_is_recorded_as_written_and_takes_no_action(
    server: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """As a native call with malformed arguments on the chat path: kept on the call, no action taken,
    and the worker's complaint goes back as the call's tool turn."""
    broken = '<tool_call>{"name": "bash", "arguments": {"command": "ls"</tool_call>'
    policy = OpenAIChatPolicy(server, "tiny", native_tools=True, tokenizer=str(tokenizer_dir))
    first, second = _converse(
        policy, [broken, SUBMIT], "[error] no action found in your reply; run a ```bash``` block or submit"
    )
    assert first.action is None and first.model_call is not None
    assert first.model_call.tool_calls == [{"id": "call-0", "type": "function", "function": {
        "name": "bash", "arguments": '{"name": "bash", "arguments": {"command": "ls"'}}]  # fmt: skip
    assert policy.messages[3]["role"] == "tool" and second.action == ToolAction("submit")
    assert second.model_call is not None and second.model_call.history_break is False
    [call, _] = [
        e for e in _record([first.model_call, second.model_call], tmp_path) if e.type == "model_call"
    ]
    assert call.payload.tool_calls == first.model_call.tool_calls  # the event validates and keeps it


def test_hermes_blocks_and_think_blocks_are_read_as_vllms_parsers_read_them() -> None:
    assert parse_tool_call_blocks("no call here") == ("no call here", [])
    content, calls = parse_tool_call_blocks("ok " + CALL_LS + "\n" + SUBMIT, first_id=3)
    assert content == "ok " and [c["id"] for c in calls] == ["call-3", "call-4"]
    assert [c["function"]["name"] for c in calls] == ["bash", "submit"]
    # a block cut at the length limit is still a block; an object without a name is malformed
    _, [cut] = parse_tool_call_blocks('<tool_call>{"name": "submit", "arguments": {}}')
    assert cut["function"] == {"name": "submit", "arguments": "{}"}
    _, [nameless] = parse_tool_call_blocks('<tool_call>{"arguments": {}}</tool_call>')
    assert nameless["function"] == {"name": "", "arguments": '{"arguments": {}}'}
    assert split_reasoning("<think>look first</think>ls") == ("look first", "ls")
    assert split_reasoning("opened by the prompt</think>ls") == ("opened by the prompt", "ls")
    assert split_reasoning("<think>cut off") == ("cut off", "")
    assert split_reasoning("plain answer") == (None, "plain answer")


def test_token_in_out_records_the_think_block_as_reasoning(
    server: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    policy = OpenAIChatPolicy(server, "tiny", native_tools=True, tokenizer=str(tokenizer_dir))
    first, second = _converse(policy, ["<think> look first </think>" + CALL_LS, "submit"], "[bash exit=0]")
    assert first.model_call is not None and first.model_call.reasoning == " look first "
    assert first.model_call.completion == "" and first.action == ToolAction("bash", {"command": "ls"})
    assert policy.messages[2]["reasoning_content"] == " look first "
    assert second.model_call is not None and second.model_call.reasoning is None
    sent = [_prompt(r) for r in _Server.requests]
    # the template renders the reasoning back as it was generated: the history is the whole conversation
    assert sent[1] == ChatTokens(tokenizer_dir, tools=TOOL_SCHEMAS).render(
        policy.messages[:4], add_generation_prompt=True
    )
    events = _record([first.model_call, second.model_call], tmp_path)
    from fold.samples import sample_rows

    [row] = sample_rows(fold_episode(events[0].episode_id, events))
    assert json.loads(row["response_messages"])[0]["reasoning_content"] == " look first "


def test_token_in_out_with_tools_needs_a_template_that_renders_them(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    from tests.rollouts import tiny_chat

    plain = tmp_path / "plain"
    tok = chat_tokenizer(plain, CORPUS, vocab_size=300)
    tok.chat_template = (  # ChatML without tools (the template tiny_chat had before it took them)
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    tok.save_pretrained(plain)
    with pytest.raises(PolicySpecError, match="renders no tools: tools=1 with token in/out needs"):
        OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", native_tools=True, tokenizer=str(plain))
    OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", tokenizer=str(plain)).close()  # without tools: fine
    mute = tmp_path / "mute"
    tok.chat_template = tiny_chat.CHAT_TEMPLATE.replace(
        "{{ m['content'] }}\n</tool_response>", "</tool_response>"
    )
    tok.save_pretrained(mute)
    with pytest.raises(PolicySpecError, match="renders no tool messages"):
        OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", native_tools=True, tokenizer=str(mute))
    refusing = tmp_path / "refusing"
    tok.chat_template = (
        "{% if tools %}{{ raise_exception('no tools here') }}{% endif %}" + tiny_chat.CHAT_TEMPLATE
    )
    tok.save_pretrained(refusing)
    with pytest.raises(PolicySpecError, match="cannot render tool calls and tool messages"):
        OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", native_tools=True, tokenizer=str(refusing))


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_chat_replys_reasoning_is_recorded_sent_back_and_kept_in_the_samples(
    field: str, server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SGLang and older vLLM name the reasoning parser's output ``reasoning_content``, newer vLLM
    ``reasoning``: either is recorded apart from the answer, goes back to the server with the
    assistant turn (as Qwen3's template wants it within an agent loop), and reaches the samples."""
    monkeypatch.setattr(_Server, "reasoning", field)
    policy = OpenAIChatPolicy(server, "tiny", logprob_semantics="processed")
    first, second = _converse(
        policy, ["<think>the file first</think>```bash\nls\n```", "submit"], "[bash exit=0]\nanswer.txt"
    )
    assert first.model_call is not None and second.model_call is not None
    assert (first.model_call.reasoning, first.model_call.completion) == ("the file first", "```bash\nls\n```")
    assert first.action == ToolAction("bash", {"command": "ls"}) and second.model_call.reasoning is None
    answered = {"role": "assistant", "content": "```bash\nls\n```", "reasoning_content": "the file first"}
    assert _Server.requests[1]["messages"][2] == answered
    plain = OpenAIChatPolicy(server, "tiny", server="openai")  # OpenAI's own message fields only
    plain.messages = policy.messages
    assert "reasoning_content" not in plain.request_body()["messages"][2]
    plain.close()
    events = _record([first.model_call, second.model_call], tmp_path)
    calls = [e.payload for e in events if e.type == "model_call"]
    assert (
        calls[0].reasoning == "the file first" and calls[1].messages[2].reasoning_content == "the file first"
    )
    from fold.samples import sample_rows

    rows = sample_rows(fold_episode(events[0].episode_id, events))
    replies = [m for r in rows for m in json.loads(r["response_messages"]) if m["role"] == "assistant"]
    assert replies[0]["reasoning_content"] == "the file first" and "reasoning_content" not in replies[-1]


@pytest.mark.parametrize("tools", [True, False])
def test_token_in_out_goes_on_with_a_template_that_draws_the_last_assistant_turn_apart(
    tools: bool, server: str, tmp_path: Path
) -> None:
    """Qwen3's template opens an empty ``<think>`` block in a conversation's last assistant turn only:
    the turn is read as drawn with a turn after it, so histories continue (they used to stop at the
    second call: the template seemed to render earlier turns differently)."""
    from tests.rollouts.tiny_chat import LAST_TURN_THINKS

    tok_dir = tmp_path / "tok"
    chat_tokenizer(tok_dir, CORPUS, vocab_size=400, template=LAST_TURN_THINKS)
    tokens = ChatTokens(tok_dir, tools=TOOL_SCHEMAS if tools else None)
    alone = tokens.render(tokens.base, add_generation_prompt=False)
    followed = tokens.render([*tokens.base, {"role": "user", "content": "x"}], add_generation_prompt=False)
    assert followed[: len(alone)] != alone  # (the template's quirk, which the old reading tripped on)
    replies = [CALL_LS, CALL_LS, SUBMIT] if tools else ["```bash\nls\n```"] * 2 + ["done"]
    policy = OpenAIChatPolicy(server, "tiny", native_tools=tools, tokenizer=str(tok_dir))
    steps = _converse(policy, replies, "[bash exit=0]\nanswer.txt", "[bash exit=0]\n")
    assert all(s.model_call is not None and not s.model_call.history_break for s in steps)
    sent = [_prompt(r) for r in _Server.requests]
    for before, after, step in zip(sent, sent[1:], steps, strict=False):
        completion = step.model_call.completion_token_ids or []  # type: ignore[union-attr]
        assert after[: len(before) + len(completion)] == before + completion  # the history only grew
    if tools:
        assert steps[2].action == ToolAction("submit") and policy.messages[3]["role"] == "tool"


def test_calls_that_are_well_formed_json_of_the_wrong_shape_take_no_action() -> None:
    from rollouts.policies import acted_call, tool_call_action

    for block in ('{"name": "bash", "arguments": null}', '{"name": "bash", "arguments": [1]}',
                  '{"name": "bash", "arguments": "[1]"}', '{"tool": "bash", "command": "ls"}'):  # fmt: skip
        _, calls = parse_tool_call_blocks(f"<tool_call>{block}</tool_call>")
        assert tool_call_action(calls) is None, block
    _, [deep] = parse_tool_call_blocks("<tool_call>" + "[" * 5000)  # too deep for json: kept, no crash
    assert deep["function"]["name"] == "" and tool_call_action([deep]) is None
    # of several calls, the first of a known tool acts, and says which it was
    _, calls = parse_tool_call_blocks('<tool_call>{"name": "search", "arguments": {}}</tool_call>' + CALL_LS)
    assert acted_call(calls) == (1, ToolAction("bash", {"command": "ls"}))
    assert split_reasoning("x<think>abc</think>ans") == ("abc", "ans")  # (vLLM drops text before the tag)


def test_the_call_acted_on_is_the_one_the_next_tool_turn_answers(server: str, tokenizer_dir: Path) -> None:
    search = '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'
    policy = OpenAIChatPolicy(server, "tiny", native_tools=True, tokenizer=str(tokenizer_dir))
    first, _ = _converse(policy, [search + CALL_LS, SUBMIT], "[bash exit=0]\nanswer.txt")
    assert first.action == ToolAction("bash", {"command": "ls"})
    assert first.model_call is not None and [c["id"] for c in first.model_call.tool_calls or []] == [
        "call-0",
        "call-1",
    ]
    assert [c["id"] for c in policy.messages[2]["tool_calls"]] == ["call-1"]  # the bash call, acted on
    assert policy.messages[3]["tool_call_id"] == "call-1"
