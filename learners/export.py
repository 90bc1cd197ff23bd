"""Exports of a pinned dataset to the trainers people use, each with a lineage sidecar.

``verl``: the RL parquet verl's data loaders read (``data_source``, ``prompt`` as
chat messages, ``ability``, ``reward_model``, ``extra_info``) in ``train.parquet``,
and the token-level form of the same samples in ``tokens.parquet``
(``input_ids``, ``response_mask``, ``rollout_log_probs``, ``reward``, ``uid`` = the
group, so group-relative advantages can be recomputed). ``trl``: conversational
prompt/completion jsonl with the reward. ``openrlhf``: ``input``/``output``/``reward``
jsonl. ``hf``: a Hugging Face ``datasets`` directory (what ``Dataset.save_to_disk`` writes:
an Arrow stream file, ``state.json``, ``dataset_info.json``) that ``datasets.load_from_disk``
opens, with the chat prompt, the completion and the token-level columns; it is written with
pyarrow alone, so exporting needs no ``datasets`` install. ``lineage.json`` beside each
names the lake, the Delta versions read, the judge name and version, the row count and the
samples excluded by reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from learners.dataset import DatasetSpec, Sample, SampleSet, load_samples
from learners.errors import LearnerConfigError

FORMATS = ("verl", "trl", "openrlhf", "hf")

_TOOL_CALL = pa.struct([
    pa.field("id", pa.string()), pa.field("type", pa.string()),
    pa.field("function", pa.struct([pa.field("name", pa.string()), pa.field("arguments", pa.string())])),
])  # fmt: skip
_MESSAGE = pa.struct([
    pa.field("role", pa.string()), pa.field("content", pa.string()),
    pa.field("tool_calls", pa.list_(_TOOL_CALL)), pa.field("tool_call_id", pa.string()),
    pa.field("reasoning_content", pa.string()),
])  # fmt: skip
"""A chat message as the trainers' chat templates take it: tool calls, their ids and reasoning kept."""
_TOOL_KWARGS = pa.struct([("create_kwargs", pa.struct([("task_id", pa.string()), ("family", pa.string())]))])
"""What verl's tool agent loop passes one tool's ``create`` (the task the tool instance acts on)."""


def _tool_call(c: dict[str, Any]) -> dict[str, Any]:
    fn = c.get("function") or {}
    args = fn.get("arguments")
    return {"id": str(c.get("id") or ""), "type": str(c.get("type") or "function"),
            "function": {"name": str(fn.get("name") or ""),
                         "arguments": args if isinstance(args, str) else json.dumps(args or {})}}  # fmt: skip


def _chat(messages: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Messages with what a chat template needs of them: role, content, tool calls and ids, reasoning."""
    out = []
    for m in messages or []:
        msg: dict[str, Any] = {"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
        if m.get("tool_calls"):
            msg["tool_calls"] = [_tool_call(c) for c in m["tool_calls"]]
        if m.get("tool_call_id"):
            msg["tool_call_id"] = str(m["tool_call_id"])
        reasoning = m.get("reasoning_content") or m.get("reasoning")
        if reasoning:
            msg["reasoning_content"] = str(reasoning)
        out.append(msg)
    return out


def _messages(s: Sample) -> list[dict[str, Any]]:
    return _chat(s.messages)


def _replies(s: Sample) -> list[dict[str, Any]]:
    """What followed the prompt (one assistant reply; a multi-turn sequence's replies and tool results)."""
    return _chat(s.response_messages) or [{"role": "assistant", "content": s.completion}]


def _columnar(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every field of :data:`_MESSAGE` (parquet needs one shape)."""
    return [{"tool_calls": None, "tool_call_id": None, "reasoning_content": None, **m} for m in messages]


def _response_mask(s: Sample) -> list[int]:
    """The loss mask over the response (what ``rollout_log_probs`` has one entry per)."""
    return s.completion_mask or [1] * len(s.completion_ids)


def _verl(data: SampleSet, out: Path, tools: Sequence[str] = ()) -> None:
    """The RL parquet for verl, one row per task, and the token-level samples beside it.

    verl's own rollouts sample the G attempts of each task; ``tokens.parquet`` holds the recorded
    ones (response-length masks and log-probs, ``uid`` = the group) for its off-policy path.
    ``extra_info.tools_kwargs`` maps each of ``tools`` to the ``create_kwargs`` its tool gets in
    verl's tool agent loop (the task it acts on), a struct datasets reads as a dict.
    """
    rows: list[dict[str, Any]] = []
    tokens = []
    seen: set[str] = set()
    for s in data.samples:
        if s.task_id not in seen:
            seen.add(s.task_id)
            rows.append({
                "data_source": f"trajlake/{s.task_family or 'tasks'}",
                "prompt": _columnar(_messages(s)),
                "ability": "agent",
                # a reference the reward function resolves to the task's judge (no stale score)
                "reward_model": {"style": "trajlake", "ground_truth": _reference(data, s)},
                "agent_name": "tool_agent",
                "extra_info": {"index": len(rows), "split": "train", "task_id": s.task_id,
                               "family": s.task_family or "", "need_tools_kwargs": bool(tools),
                               **({"tools_kwargs": {t: {"create_kwargs": {
                                   "task_id": s.task_id, "family": s.task_family or ""}} for t in tools}}
                                  if tools else {})},
            })  # fmt: skip
        tokens.append(
            {
                "uid": s.group_id,
                "episode_id": s.episode_id,
                "prompts": s.prompt_ids,
                "responses": s.completion_ids,
                "input_ids": s.prompt_ids + s.completion_ids,
                "prompt_length": len(s.prompt_ids),
                "response_mask": _response_mask(s),
                "rollout_log_probs": s.behaviour_logprobs,
                "temperature": s.temperature,
                "reward": s.reward,
                "policy_version": s.policy_version,
            }
        )
    schema = pa.schema([
        pa.field("data_source", pa.string()), pa.field("prompt", pa.list_(_MESSAGE)),
        pa.field("ability", pa.string()),
        pa.field("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        pa.field("agent_name", pa.string()),
        pa.field("extra_info", pa.struct([
            ("index", pa.int64()), ("split", pa.string()), ("task_id", pa.string()), ("family", pa.string()),
            ("need_tools_kwargs", pa.bool_()),
            *([("tools_kwargs", pa.struct([(t, _TOOL_KWARGS) for t in tools]))] if tools else []),
        ])),
    ])  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / "train.parquet")
    token_schema = pa.schema(
        [
            ("uid", pa.string()), ("episode_id", pa.string()), ("prompts", pa.list_(pa.int32())),
            ("responses", pa.list_(pa.int32())), ("input_ids", pa.list_(pa.int32())),
            ("prompt_length", pa.int32()), ("response_mask", pa.list_(pa.int8())),
            ("rollout_log_probs", pa.list_(pa.float32())), ("temperature", pa.float32()),
            ("reward", pa.float64()), ("policy_version", pa.string()),
        ]
    )  # fmt: skip
    pq.write_table(pa.Table.from_pylist(tokens, schema=token_schema), out / "tokens.parquet")


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def _trl(data: SampleSet, out: Path) -> None:
    """TRL's conversational prompt/completion, one row per assistant turn.

    The completion is that turn alone (trained); the conversation before it, tool results and
    earlier turns included, is the prompt (context, never trained).
    """
    rows = []
    for s in data.samples:
        history = _messages(s)
        for turn, m in enumerate(_replies(s)):
            if m["role"] == "assistant":
                rows.append({"prompt": list(history), "completion": [m], "turn": turn, "reward": s.reward,
                             "group_id": s.group_id, "episode_id": s.episode_id})  # fmt: skip
            history.append(m)
    _jsonl(out / "train.jsonl", rows)


def _reference(data: SampleSet, s: Sample) -> str:
    """What a reward function resolves to the task's judge (no stale score): task, judge and version."""
    return json.dumps({"task_id": s.task_id, "family": s.task_family, "judge": data.judge_name,
                       "judge_version": data.judge_version})  # fmt: skip


def _openrlhf(data: SampleSet, out: Path) -> None:
    """OpenRLHF's chat input, tool turns intact, with the final reply and the conversation after it.

    ``input`` is the message list its ``apply_chat_template`` renders (``--input_key input
    --apply_chat_template``); ``label`` (``--label_key label``) is the task reference a reward
    function resolves, ``datasource`` the family.
    """
    _jsonl(out / "train.jsonl", [
        {"input": _messages(s), "output": s.completion, "output_messages": _replies(s), "reward": s.reward,
         "label": _reference(data, s), "datasource": f"trajlake/{s.task_family or 'tasks'}",
         "group_id": s.group_id, "episode_id": s.episode_id}
        for s in data.samples
    ])  # fmt: skip


def _hf(data: SampleSet, out: Path) -> None:
    import hashlib

    schema = pa.schema(
        [
            ("prompt", pa.list_(_MESSAGE)), ("completion", pa.string()), ("input_ids", pa.list_(pa.int32())),
            ("prompt_length", pa.int32()), ("response_mask", pa.list_(pa.int8())),
            ("rollout_log_probs", pa.list_(pa.float32())), ("temperature", pa.float32()),
            ("reward", pa.float64()), ("uid", pa.string()), ("episode_id", pa.string()),
            ("task_id", pa.string()), ("policy_version", pa.string()),
        ]
    )  # fmt: skip
    rows = [
        {
            "prompt": _columnar(_messages(s)), "completion": s.completion,
            "input_ids": s.prompt_ids + s.completion_ids,
            "prompt_length": len(s.prompt_ids),
            "response_mask": _response_mask(s),
            "rollout_log_probs": s.behaviour_logprobs, "temperature": s.temperature, "reward": s.reward,
            "uid": s.group_id, "episode_id": s.episode_id, "task_id": s.task_id,
            "policy_version": s.policy_version,
        }
        for s in data.samples
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=schema)
    name = "data-00000-of-00001.arrow"
    with pa.OSFile(str(out / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    digest = hashlib.sha256((out / name).read_bytes()).hexdigest()[:16]
    state: dict[str, Any] = {
        "_data_files": [{"filename": name}], "_fingerprint": digest, "_format_columns": None,
        "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": "train",
    }  # fmt: skip
    (out / "state.json").write_text(json.dumps(state, indent=2))
    # no "features": datasets takes them from the Arrow schema (the same in every datasets version)
    about = f"trajlake export: {len(rows)} samples judged by {data.judge_name} {data.judge_version}"
    info = {"description": f"{about}; see lineage.json", "citation": "", "homepage": "", "license": ""}
    (out / "dataset_info.json").write_text(json.dumps(info, indent=2))


def export_dataset(
    spec: DatasetSpec,
    fmt: str,
    out: str | Path,
    *,
    tools: Sequence[str] = (),
    reward_function: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write the samples ``spec`` pins in ``fmt`` under ``out`` (created); return the lineage written.

    ``tools``: the tool names a verl export's ``tools_kwargs`` covers. ``reward_function``: where a
    trainer finds the function that scores a response with the task's judge (``path``, ``name``),
    recorded in the lineage and, for verl, in the export's ``README.md`` as verl's settings.

    Raises:
        LearnerConfigError: an unknown format, or ``out`` already holds an export.
    """
    if fmt not in FORMATS:
        raise LearnerConfigError(f"unknown export format {fmt!r}: one of {', '.join(FORMATS)}")
    target = Path(out)
    if (target / "lineage.json").exists():
        raise LearnerConfigError(f"{target} already holds an export; give a new --out directory")
    target.mkdir(parents=True, exist_ok=True)
    data = load_samples(dataclasses.replace(spec, with_messages=True))
    if fmt == "verl":
        _verl(data, target, tools)
    else:
        {"trl": _trl, "openrlhf": _openrlhf, "hf": _hf}[fmt](data, target)
    lineage = {
        "format": fmt,
        "rows": len(data.samples),
        "episodes": data.episodes,
        "lake": os.path.abspath(spec.lake) if "://" not in spec.lake else spec.lake,
        "table_versions": data.table_versions,
        "judge_name": data.judge_name,
        "judge_version": data.judge_version,
        "samples_excluded": dict(data.skipped),
        "token_history": dict(data.token_history),
        "filters": {
            "task_ids": sorted(spec.task_ids) if spec.task_ids is not None else None,
            "families": sorted(spec.families) if spec.families is not None else None,
            "policy_versions": sorted(spec.policy_versions) if spec.policy_versions is not None else None,
        },
    }
    if reward_function is not None:
        lineage["reward_function"] = dict(reward_function)
        if fmt == "verl":
            (target / "README.md").write_text(
                f"# verl export ({len(data.samples)} samples; see lineage.json)\n\n"
                "Train on `train.parquet` (one row per task); score responses with the task's trajlake\n"
                "judge by giving verl these settings:\n\n"
                f"    data.train_files={(target / 'train.parquet').resolve()}\n"
                f"    reward.custom_reward_function.path={reward_function['path']}\n"
                f"    reward.custom_reward_function.name={reward_function['name']}\n"
            )
    (target / "lineage.json").write_text(json.dumps(lineage, indent=2, sort_keys=True))
    return lineage
