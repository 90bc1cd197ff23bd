"""Token ids and log-probs are read the way vLLM and OpenAI actually send them (recorded response shapes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollouts.errors import PolicyUnavailableError
from rollouts.policies import OpenAIChatPolicy, ToolAction, parse_chat_reply, tool_call_action
from schemas.errors import SchemaError

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
        make_policy("openai:http://127.0.0.1:8000/v1#qwen?topk=5")
    with pytest.raises(PolicySpecError, match="logprobs is processed, scaled or raw"):
        make_policy("openai:http://127.0.0.1:8000/v1#qwen?logprobs=post")
    tuned = make_policy(
        "openai:http://127.0.0.1:8000/v1#qwen?server=sglang&top_k=20&seed=3&logprobs=scaled&weights=c1"
    )
    assert isinstance(tuned, OpenAIChatPolicy)
    assert tuned.request_sampling["top_k"] == 20 and tuned.request_sampling["seed"] == 3
    assert tuned.served_by == {
        "kind": "sglang",
        "logprob_semantics": "scaled",
        "semantics_source": "configured",
    }
    assert tuned.policy_version == "c1"
    tuned.close()


def test_every_sampling_parameter_is_sent_so_no_server_default_applies_unseen() -> None:
    """vLLM and SGLang fill what a request leaves out from the model's generation_config.json
    (top_k=20, top_p=0.95 for common chat models): the request leaves nothing out, and the
    episode records the transform as sent."""
    from rollouts.errors import PolicySpecError

    vllm = OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", temperature=0.7, seed=5)
    body = vllm.request_body()
    for name, value in {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "presence_penalty": 0.0,
                        "frequency_penalty": 0.0, "repetition_penalty": 1.0, "seed": 5}.items():  # fmt: skip
        assert body[name] == value, name
    assert vllm.sampling["extra"]["top_k"] == -1 and vllm.sampling["top_p"] == 1.0
    vllm.close()
    # OpenAI's own fields only for any other server, which may refuse vLLM's
    plain = OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", server="openai").request_body()
    assert "top_k" not in plain and "repetition_penalty" not in plain and plain["top_p"] == 1.0
    with pytest.raises(PolicySpecError, match="unknown sampling parameter"):
        OpenAIChatPolicy("http://127.0.0.1:1/v1", "m", sampling={"topk": 3})


def test_what_the_log_probs_are_of_is_told_by_three_one_token_replies() -> None:
    import math

    from rollouts.policies import classify_logprobs

    logits = {"a": 2.0, "b": 1.0, "c": 0.0, "d": -1.0}

    def dist(t: float, k: int | None = None) -> dict[str, float]:
        kept = sorted(logits, key=logits.get, reverse=True)[: k or len(logits)]  # type: ignore[arg-type]
        z = math.log(sum(math.exp(logits[x] / t) for x in kept))
        return {x: logits[x] / t - z for x in kept}

    full = dist(1.0)
    assert classify_logprobs(full, full, full) == "raw"  # nothing moves with the temperature
    assert classify_logprobs(full, dist(0.5), dist(1.0, 2)) == "processed"  # renormalised over top-k
    assert classify_logprobs(full, dist(0.5), full) == "scaled"  # tempered, not truncated
    peaked = {"a": -1e-5, "b": -12.0}
    assert classify_logprobs(peaked, peaked, peaked) is None  # one token holds the mass: cannot tell
    assert classify_logprobs({}, {}, {}) is None


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
    assert event.schema_version == 4
    assert event.payload.tool_calls == reply.tool_calls
    assert event.payload.messages[1].tool_calls == reply.tool_calls  # what the server saw next turn
    assert event.payload.messages[2].tool_call_id == "chatcmpl-tool-5b1e"


def test_version_1_2_and_3_model_calls_still_read() -> None:
    from schemas import parse_event
    from tests.pipelines.factories import model, wire

    for version in (1, 2):
        doc = model("ep", 1)
        doc["schema_version"] = version
        event = parse_event(wire(doc))
        assert event.schema_version == 4 and event.payload.tool_calls is None
        # what sampled a call before v3 was never recorded: its log-probs' meaning is unknown
        assert event.payload.served_by is None and event.payload.sampling is None
    # v3 had no reasoning, of the call or of its messages: a v3 event reads with none, as written
    doc = model("ep", 1, messages=[{"role": "user", "content": "go"}, {"role": "assistant", "content": "ls"}])
    doc["schema_version"] = 3
    event = parse_event(wire(doc))
    assert event.schema_version == 4 and event.payload.reasoning is None
    assert event.payload.messages is not None and event.payload.messages[1].reasoning_content is None
    with pytest.raises(SchemaError, match="newer than this reader"):
        parse_event(wire({**doc, "schema_version": 5}))


def test_the_reasoning_parsers_output_is_read_under_either_name() -> None:
    reply = load("vllm_return_token_ids.json")
    reply["choices"][0]["message"]["reasoning_content"] = "list first"  # SGLang, older vLLM
    assert parse_chat_reply(reply).reasoning == "list first"
    del reply["choices"][0]["message"]["reasoning_content"]
    reply["choices"][0]["message"]["reasoning"] = "list first"  # newer vLLM
    assert parse_chat_reply(reply).reasoning == "list first"
    assert parse_chat_reply(load("vllm_tool_call.json")).reasoning is None


def test_token_in_out_continues_the_history_as_the_template_renders_the_whole_conversation(
    tmp_path: Path,
) -> None:
    from rollouts.policies import ChatTokens
    from tests.rollouts.tiny_chat import chat_tokenizer

    chat_tokenizer(tmp_path, "run the tests, then submit the answer", vocab_size=300)
    tokens = ChatTokens(tmp_path)
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "run the tests"}]
    prompt = tokens.prompt(first)
    answer = tokens.tok.encode("```bash\nls\n```", add_special_tokens=False)
    observation = {"role": "user", "content": "[bash exit=0]\nanswer.txt"}
    whole = tokens.render([*first, {"role": "assistant", "content": "```bash\nls\n```"}, observation],
                          add_generation_prompt=True)  # fmt: skip
    # a completion that stopped on the end-of-turn token, and one cut by the length limit
    assert prompt + answer + [tokens.eos] + tokens.turn(answer + [tokens.eos], [observation]) == whole
    assert prompt + answer + tokens.turn(answer, [observation]) == whole


def test_an_sglang_generate_reply_gives_its_ids_and_log_probs() -> None:
    from rollouts.policies import parse_sglang_reply

    # the shape of SGLang's native /generate with return_logprob (meta_info.output_token_logprobs
    # holds [logprob, token id, text] per token): written from its documentation, not recorded
    reply = {
        "text": "ls", "output_ids": [17, 2],
        "meta_info": {"output_token_logprobs": [[-0.25, 17, None], [-0.5, 2, None]], "prompt_tokens": 4,
                      "finish_reason": {"type": "stop", "matched": 2}},
    }  # fmt: skip
    r = parse_sglang_reply(reply, [1, 2, 3, 4])
    assert (r.completion_token_ids, r.completion_logprobs, r.finish_reason) == (
        [17, 2],
        [-0.25, -0.5],
        "stop",
    )
    disagreeing = {**reply, "output_ids": [17, 3]}
    assert parse_sglang_reply(disagreeing, [1]).completion_token_ids is None  # neither is kept
    with pytest.raises(PolicyUnavailableError, match="no meta_info"):
        parse_sglang_reply({"text": "x"}, [1])
