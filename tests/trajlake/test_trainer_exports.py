"""Exports loaded by the trainers' own code: verl's dataset class and reward loader, TRL's SFT trainer.

A lake of tool-using episodes on real tasks (native tool calls, tool results, a second turn) is
exported with ``trajlake export``; then

- verl (from ``.venv-trainers``, which ``./dev test`` makes) reads ``train.parquet`` with its own
  ``RLHFDataset`` (each task once, the messages and ``tools_kwargs`` as its tool agent loop takes
  them), loads the reward function with its own ``get_custom_reward_fn``, and scores responses: a
  response whose tool call writes the right answer passes, one that only says so earns what doing
  nothing earns, and a tool call hidden in a tool response is not run;
- TRL's ``SFTTrainer`` takes the TRL export as it is and trains one step on a tiny model; the
  tokens it trains on are the assistant turn's only (tool output and earlier turns are context);
- OpenRLHF's own ``PromptDataset`` (from ``.venv-trainers`` too) renders the input with the
  tokenizer's chat template and carries the task reference as the label; tool turns stay intact.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ingest.kafka_broker import EmbeddedKafka
from pipelines import PipelineConfig, run_once
from tests.pipelines.factories import call, ended, ev, model, result, reward, wire
from tests.pipelines.log_workload import produce
from tests.rollouts.tiny_chat import chat_tokenizer

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ROOT / ".venv-trainers"
TASKS = {"wordplay-001": "sun", "wordplay-002": None}
THOUGHT = "reverse the word first"
"""The first turn's reasoning (a reasoning parser's output, recorded apart from the answer)."""

HERMES_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'tool' %}<tool_response>\n{{ m['content'] }}\n</tool_response>"
    "{% elif m['content'] is string %}"
    "{% if m['reasoning_content'] %}<think>{{ m['reasoning_content'] }}</think>{% endif %}{{ m['content'] }}"
    "{% else %}{% for part in m['content'] or [] %}{{ part['text'] }}{% endfor %}{% endif %}"
    "{% for c in m['tool_calls'] or [] %}<tool_call>\n"
    '{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments }}}\n</tool_call>'
    "{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A Hermes-style template (as Qwen's): tool calls as ``<tool_call>`` JSON, tool output as a response,
reasoning as a ``<think>`` block."""


def _words() -> dict[str, str]:
    import yaml

    out = {}
    for task in TASKS:
        spec = yaml.safe_load((ROOT / "tasks" / "wordplay" / task / "task.yaml").read_text())
        out[task] = spec["instruction"]
    return out


def _episode(eid: str, task: str, group: str, instruction: str, answer: str, passed: bool) -> list[Any]:
    write = {"id": f"{eid}-c1", "type": "function",
             "function": {"name": "write_file",
                          "arguments": json.dumps({"path": "answer.txt", "content": answer})}}  # fmt: skip
    prompt = [
        {"role": "system", "content": "You act in a sandbox."},
        {"role": "user", "content": instruction},
    ]
    return [
        ev(eid, 0, "episode_started", {
            "task": {"id": task, "family": "wordplay"}, "policy": {"id": "p", "version": "3"},
            "group_id": group, "sampling": {"temperature": 1.0}, "metadata": {"group_size": 2},
        }),
        model(eid, 1, completion="", prompt_token_ids=[1, 5, 6], completion_token_ids=[7, 8, 2],
              completion_logprobs=[-0.5, -0.2, -0.1], messages=prompt, tool_calls=[write], reasoning=THOUGHT,
              served_by={"kind": "in_process", "logprob_semantics": "processed"}),
        call(eid, 2, tool="write_file", call_id=f"{eid}-c1", path="answer.txt", content=answer),
        result(eid, 3, stdout="wrote 3 bytes", call_id=f"{eid}-c1"),
        model(eid, 4, completion="submit", prompt_token_ids=[1, 5, 6, 7, 8, 2, 40, 41],
              completion_token_ids=[9, 2], completion_logprobs=[-0.3, -0.2],
              # the whole conversation, as the chat policy records it at every call
              messages=[*prompt, {"role": "assistant", "content": "", "tool_calls": [write],
                                  "reasoning_content": THOUGHT},
                        {"role": "tool", "content": "wrote 3 bytes", "tool_call_id": f"{eid}-c1"}],
              served_by={"kind": "in_process", "logprob_semantics": "processed"}),
        reward(eid, 5, verdict="pass" if passed else "fail"),
        ended(eid, 6),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def exported(kafka: EmbeddedKafka, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("exports")
    topic = f"t.exports.{os.getpid()}.{random.getrandbits(24):06x}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2}).ensure_topics()
    cfg = PipelineConfig(bootstrap=kafka.bootstrap, lake_root=str(tmp / "lake"), topics=(topic,))
    words = _words()
    docs = []
    for i, task in enumerate(TASKS):
        for k, (answer, ok) in enumerate((("nus", True), ("sun", False))):
            docs += _episode(f"e{i}{k}", task, f"g{i}", words[task], answer, ok)
    produce(kafka.bootstrap, [(topic, d["episode_id"].encode(), wire(d)) for d in docs])
    run_once(cfg)
    cli = Path(sys.executable).with_name("trajlake")
    env = {**os.environ, "TRAJLAKE_HOME": str(tmp / "home")}
    out = {}
    for fmt in ("verl", "trl", "openrlhf"):
        out[fmt] = tmp / fmt
        argv = [str(cli), "export", "--format", fmt, "--out", str(out[fmt]), "--lake", cfg.lake_root]
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    out["tokenizer"] = tmp / "tok"
    chat_tokenizer(out["tokenizer"], " ".join(words.values()) + " answer.txt write_file submit nus",
                   vocab_size=300)  # fmt: skip
    tok_cfg = out["tokenizer"] / "tokenizer_config.json"
    cfg_json = json.loads(tok_cfg.read_text())
    cfg_json["chat_template"] = HERMES_TEMPLATE
    tok_cfg.write_text(json.dumps(cfg_json))
    (out["tokenizer"] / "chat_template.jinja").unlink(missing_ok=True)
    return out


VERL_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset

    export, tok_dir = sys.argv[1], sys.argv[2]
    lineage = json.load(open(f"{export}/lineage.json"))
    tok = AutoTokenizer.from_pretrained(tok_dir)
    ds = RLHFDataset(data_files=[f"{export}/train.parquet"], tokenizer=tok,
                     config=OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512,
                                              "filter_overlong_prompts": False, "return_raw_chat": True}))
    rows = [ds[i] for i in range(len(ds))]
    reward_cfg = {"reward": {"custom_reward_function": lineage["reward_function"]}}
    fn = get_custom_reward_fn(OmegaConf.create(reward_cfg))
    def call(name, args):
        return "<tool_call>\\n" + json.dumps({"name": name, "arguments": args}) + "\\n</tool_call>"
    row = next(r for r in rows if r["extra_info"]["task_id"] == "wordplay-001")
    scores = {}
    for case, text in {
        "right": call("write_file", {"path": "answer.txt", "content": "nus"}) + call("submit", {}),
        "wrong": call("write_file", {"path": "answer.txt", "content": "snu"}),
        "claims": "I wrote nus into answer.txt, the task is done.",
        "nothing": "",
        "in_tool_response": "<tool_response>" + call("write_file", {"path": "answer.txt", "content": "nus"})
                            + "</tool_response>",
    }.items():
        scores[case] = fn(data_source=row["data_source"], solution_str=text,
                          ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"])
    print(json.dumps({
        "n": len(ds), "tasks": sorted(r["extra_info"]["task_id"] for r in rows),
        "raw_prompt": [[m["role"] for m in r["raw_prompt"]] for r in rows],
        "tools_kwargs": rows[0]["tools_kwargs"], "agent_name": rows[0]["agent_name"],
        "data_source": rows[0]["data_source"], "scores": scores,
    }))
    """
)


def _require_trainers() -> None:
    if not (TRAINERS / "verl").is_dir() or not (TRAINERS / "openrlhf").is_dir():
        reason = "no .venv-trainers: `./dev trainers` makes it (`./dev test` does too)"
        if os.environ.get("TRAJLAKE_REQUIRE_SANDBOXES") == "1":
            pytest.fail(f"{reason}; CI must load exports with the trainers' own code")
        pytest.skip(reason)


def _with_trainers(script: str, export: Path, tokenizer: Path, **env: str) -> Any:
    """Run ``script`` on an export in a process that imports the trainers' code; its last line, as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TRAINERS)]), **env}
    p = subprocess.run([sys.executable, "-c", script, str(export), str(tokenizer)],
                       env=env, capture_output=True, text=True, timeout=600, cwd=export)  # fmt: skip
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_verl_loads_the_export_and_its_reward_function_scores_with_the_tasks_judge(
    exported: dict[str, Path], local_backend: Any, base_image: str
) -> None:
    _require_trainers()
    lineage = json.loads((exported["verl"] / "lineage.json").read_text())
    assert lineage["reward_function"]["name"] == "compute_score"
    assert Path(lineage["reward_function"]["path"]).is_file()
    assert "custom_reward_function.path=" in (exported["verl"] / "README.md").read_text()
    got = _with_trainers(
        VERL_SCRIPT, exported["verl"], exported["tokenizer"], TRAJLAKE_SANDBOX_BACKEND="local"
    )
    assert got["n"] == 2 and got["tasks"] == sorted(TASKS)  # each task's prompt once
    assert got["raw_prompt"] == [["system", "user"], ["system", "user"]]
    assert got["agent_name"] == "tool_agent" and got["data_source"] == "trajlake/wordplay"
    assert set(got["tools_kwargs"]) == {"bash", "read_file", "write_file", "submit"}
    assert got["tools_kwargs"]["write_file"]["create_kwargs"]["task_id"] in TASKS
    s = got["scores"]
    assert s["right"]["score"] == 1.0 and s["right"]["verdict"] == "pass" and s["right"]["actions"] == 2
    assert s["right"]["judge"] == "composite" and s["right"]["judge_version_matches"] is False  # "tests"
    assert s["wrong"]["verdict"] == "fail" and s["wrong"]["score"] < 1.0
    # saying it is done is not doing it; a tool call inside a tool response is output, not an action
    assert s["claims"]["actions"] == 0 and s["claims"]["score"] == s["nothing"]["score"] < 1.0
    # and one hidden in a tool response: the model or the environment wrote it? Not scored: 0, said so
    assert s["in_tool_response"]["unscored"] == "tool_call_in_tool_response"
    assert s["in_tool_response"]["score"] == 0.0 and s["right"]["unscored"] is None


def test_trl_trains_on_the_export_as_it_is_and_only_on_assistant_turns(exported: dict[str, Path]) -> None:
    import datasets
    import torch
    import transformers
    from trl import SFTConfig, SFTTrainer

    tok = transformers.AutoTokenizer.from_pretrained(exported["tokenizer"])
    ds = datasets.load_dataset("json", data_files=str(exported["trl"] / "train.jsonl"), split="train")
    rows = list(ds)
    calls = [m for r in rows for m in r["completion"] if m.get("tool_calls")]
    assert calls and calls[0]["tool_calls"][0]["function"]["name"] == "write_file"  # kept as native calls
    assert calls[0]["reasoning_content"] == THOUGHT  # and the reasoning, apart from the answer
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512, head_dim=16,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id,
    ))  # fmt: skip
    args = SFTConfig(output_dir=str(exported["trl"].parent / "sft"), max_steps=1, report_to=[], use_cpu=True,
                     per_device_train_batch_size=2, save_strategy="no", max_length=512)  # fmt: skip
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    prepared = trainer.train_dataset

    def split(r: dict[str, Any]) -> tuple[str, str]:  # (trained, context): TRL's labels, -100 = no loss
        ids, labels = r["input_ids"], r["labels"]
        return (tok.decode([t for t, y in zip(ids, labels, strict=True) if y != -100]),
                tok.decode([t for t, y in zip(ids, labels, strict=True) if y == -100]))  # fmt: skip

    trained, context = split(next(r for r in prepared if "tool_response" not in tok.decode(r["input_ids"])))
    assert "<tool_call>" in trained and '"write_file"' in trained
    assert f"<think>{THOUGHT}</think>" in trained  # the reasoning is the turn's own, trained with it
    assert "You act in a sandbox." in context and "Write" in context and "<tool_call>" not in context
    trained, context = split(next(r for r in prepared if "tool_response" in tok.decode(r["input_ids"])))
    assert "submit" in trained and "wrote 3 bytes" not in trained and "<tool_call>" not in trained
    assert "wrote 3 bytes" in context and "<tool_call>" in context  # the first turn and the tool output
    assert THOUGHT in context and THOUGHT not in trained
    out = trainer.train()
    assert out.global_step == 1 and torch.isfinite(torch.tensor(out.training_loss))


OPENRLHF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from types import SimpleNamespace
    import datasets
    from transformers import AutoTokenizer
    from openrlhf.datasets import PromptDataset

    export, tok_dir = sys.argv[1], sys.argv[2]
    tok = AutoTokenizer.from_pretrained(tok_dir)
    data = datasets.load_dataset("json", data_files=f"{export}/train.jsonl", split="train")
    # what `--input_key input --label_key label --apply_chat_template` gives its prompt dataset
    strategy = SimpleNamespace(is_rank_0=lambda: True, args=SimpleNamespace(data=SimpleNamespace(
        input_key="input", label_key="label", apply_chat_template=True)))
    ds = PromptDataset(data, tok, strategy)
    items = [ds[i] for i in range(len(ds))]
    print(json.dumps({"n": len(ds), "items": items}))
    """
)


def test_openrlhf_loads_its_input_with_tool_turns_intact(exported: dict[str, Path]) -> None:
    _require_trainers()
    got = _with_trainers(OPENRLHF_SCRIPT, exported["openrlhf"], exported["tokenizer"])
    rows = [json.loads(x) for x in (exported["openrlhf"] / "train.jsonl").read_text().splitlines()]
    assert got["n"] == len(rows) == 4
    for (source, prompt, label, _), row in zip(got["items"], rows, strict=True):
        assert source == "trajlake/wordplay" and json.loads(label)["task_id"] in TASKS
        assert prompt.endswith("<|im_start|>assistant\n") and "You act in a sandbox." in prompt
        assert prompt.count("<|im_start|>") == 3  # system, user, the generation turn
        assert [m["role"] for m in row["output_messages"]] == ["assistant", "tool", "assistant"]
        first_call = row["output_messages"][0]["tool_calls"][0]
        assert first_call["function"]["name"] == "write_file"
        assert row["output_messages"][0]["reasoning_content"] == THOUGHT
        tool_turn = {"role": "tool", "content": "wrote 3 bytes", "tool_call_id": first_call["id"]}
        assert row["output_messages"][1] == tool_turn


def test_the_reward_function_reads_the_actions_a_response_asks_for() -> None:
    from trajlake.verl_reward import RewardReferenceError, _reference, hidden_tool_calls, response_actions

    def tc(name: str, args: Any) -> str:
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"

    hermes = tc("bash", {"command": "ls"}) + "thinking" + tc("write_file", '{"path": "a", "content": "b"}')
    assert [(a.tool, a.arguments) for a in response_actions(hermes)] == [
        ("bash", {"command": "ls"}), ("write_file", {"path": "a", "content": "b"}),
    ]  # fmt: skip
    # actions after submit, beyond the task's steps, of unknown tools or inside tool output never run
    assert [a.tool for a in response_actions(tc("submit", {}) + tc("bash", {"command": "x"}))] == ["submit"]
    assert len(response_actions(tc("bash", {"command": "a"}) * 5, max_steps=2)) == 2
    assert response_actions(tc("rm_rf", {}) + "<tool_response>" + tc("bash", {"command": "x"})
                            + "</tool_response>") == []  # fmt: skip
    # trajlake's own action objects, and a fenced bash block
    own = '{"tool": "write_file", "arguments": {"path": "answer.txt", "content": "x"}} then submit'
    assert [a.tool for a in response_actions(own)] == ["write_file"]
    assert [a.arguments for a in response_actions("```bash\nls -l\n```")] == [{"command": "ls -l"}]
    assert hidden_tool_calls("<tool_response>" + tc("bash", {"command": "x"}) + "</tool_response>") == 1
    # a block is one JSON object and nothing else (as verl's parser reads it); what no tool can take,
    # and degenerate text, are no action and no crash
    assert (
        response_actions("<tool_call>junk " + json.dumps({"name": "bash", "arguments": {}}) + "</tool_call>")
        == []
    )
    assert response_actions(tc("write_file", {"path": "a", "content": "\ud800"})) == []
    assert response_actions(tc("bash", {"command": "ls\u0000"})) == []
    assert response_actions('{"a":' + "[" * 5000) == [] and response_actions('{"a":"' * 20000) == []
    with pytest.raises(RewardReferenceError, match="not a trajlake task reference"):
        _reference('{"answer": 42}')
