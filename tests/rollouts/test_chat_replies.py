"""Token ids and log-probs are read the way vLLM and OpenAI actually send them (recorded response shapes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollouts.errors import PolicyUnavailableError
from rollouts.policies import OpenAIChatPolicy, ToolAction, parse_chat_reply, tool_call_action

FIXTURES = Path(__file__).with_name("chat_fixtures")


def load(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((FIXTURES / name).read_text())  # type: ignore[no-any-return]


def test_vllm_return_token_ids_gives_prompt_and_completion_ids() -> None:
    r = parse_chat_reply(load("vllm_return_token_ids.json"))
    assert r.prompt_token_ids == [151644, 8948, 198, 2610, 525, 151645]
    assert r.completion_token_ids == [73594, 46216, 198, 4730, 73594]
    assert r.completion_logprobs == pytest.approx([-0.0123, -0.4, -0.001, -1.25, -0.02])
    assert r.text == "```bash\nls\n```" and r.finish_reason == "stop" and r.tool_calls == []


def test_an_older_vllm_gives_ids_only_as_token_id_strings() -> None:
    r = parse_chat_reply(load("vllm_tokens_as_ids.json"))
    assert r.completion_token_ids == [5955, 1763] and r.prompt_token_ids is None
    assert r.completion_logprobs == pytest.approx([-0.3, -0.05])


def test_openai_itself_gives_no_ids_and_none_are_invented() -> None:
    r = parse_chat_reply(load("openai_logprobs.json"))
    assert r.completion_token_ids is None and r.prompt_token_ids is None  # never re-tokenised from text
    assert r.completion_logprobs == pytest.approx([-0.31, -0.0001])


def test_a_native_tool_call_is_the_action() -> None:
    r = parse_chat_reply(load("vllm_tool_call.json"))
    assert r.text == "" and r.finish_reason == "tool_calls"
    assert tool_call_action(r.tool_calls) == ToolAction(
        "write_file", {"path": "answer.txt", "content": "olleh"}
    )
    assert r.completion_token_ids == [151657, 4913, 151658]
    bad = [{"function": {"name": "write_file", "arguments": "{not json"}}]
    assert tool_call_action(bad) is None
    assert tool_call_action([{"function": {"name": "rm_rf", "arguments": "{}"}}]) is None


def test_ids_and_logprobs_that_disagree_in_length_are_both_dropped() -> None:
    reply = load("vllm_return_token_ids.json")
    reply["choices"][0]["token_ids"] = reply["choices"][0]["token_ids"][:-1]
    r = parse_chat_reply(reply)
    assert r.completion_token_ids is None and r.completion_logprobs is None


def test_a_reply_without_a_choice_is_the_servers_failure() -> None:
    with pytest.raises(PolicyUnavailableError, match="sent no choice"):
        parse_chat_reply({"error": {"message": "model not found"}})


def test_requests_ask_vllm_for_its_token_ids_and_openai_for_nothing_it_refuses() -> None:
    vllm = OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", native_tools=True)
    body = vllm.request_body()
    assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    assert body["logprobs"] is True and {t["function"]["name"] for t in body["tools"]} == {
        "bash", "read_file", "write_file", "submit",
    }  # fmt: skip
    plain = OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", server="openai").request_body()
    assert "return_token_ids" not in plain and "tools" not in plain
    vllm.close()


def test_the_openai_policy_spec_names_the_server_and_tool_calling() -> None:
    from rollouts.errors import PolicySpecError
    from trajlake.policy_specs import make_policy

    policy = make_policy("openai:http://127.0.0.1:8000/v1#qwen-agent?server=openai&tools=1&temperature=0.5")
    assert isinstance(policy, OpenAIChatPolicy)
    assert (policy.model, policy.server, policy.native_tools) == ("qwen-agent", "openai", True)
    assert policy.sampling["temperature"] == 0.5
    policy.close()
    with pytest.raises(PolicySpecError, match="unknown option"):
        make_policy("openai:http://127.0.0.1:8000/v1#qwen?top_k=5")


def test_a_native_tool_call_is_recorded_with_its_structure(tmp_path: Path) -> None:
    from ingest import EpisodeRecorder, MemorySink
    from rollouts.policies import ModelCall
    from schemas import parse_event

    reply = parse_chat_reply(load("vllm_tool_call.json"))
    messages = [
        {"role": "user", "content": "Write hello reversed into answer.txt."},
        {"role": "assistant", "content": "", "tool_calls": reply.tool_calls},
        {"role": "tool", "content": "[write_file ok]", "tool_call_id": reply.tool_calls[0]["id"]},
    ]
    call = ModelCall(
        completion=reply.text,
        messages=messages,
        completion_token_ids=reply.completion_token_ids,
        completion_logprobs=reply.completion_logprobs,
        tool_calls=reply.tool_calls,
    )
    sink = MemorySink()
    rec = EpisodeRecorder.open(bootstrap="127.0.0.1:1", home=tmp_path, worker_id="t", sink=sink)
    with rec.episode(task={"id": "t1"}, policy={"id": "p"}) as ep:
        ep.model_call(**call.event_fields())
        ep.end("success")
    rec.close()
    [event] = [e for e in (parse_event(v) for _, _, v in sink.records) if e.type == "model_call"]
    assert event.schema_version == 2
    assert event.payload.tool_calls == reply.tool_calls
    assert event.payload.messages[1].tool_calls == reply.tool_calls  # what the server saw next turn
    assert event.payload.messages[2].tool_call_id == "chatcmpl-tool-5b1e"


def test_a_version_1_model_call_still_reads() -> None:
    from schemas import parse_event
    from tests.pipelines.factories import model, wire

    doc = model("ep", 1)
    doc["schema_version"] = 1
    event = parse_event(wire(doc))
    assert event.schema_version == 2 and event.payload.tool_calls is None
