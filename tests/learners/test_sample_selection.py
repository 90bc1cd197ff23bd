"""What the dataset selects from folded tables: nothing lost, nothing twice, every exclusion counted."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ingest.kafka_broker import EmbeddedKafka
from learners.dataset import DatasetSpec, load_samples
from pipelines import PipelineConfig, run_once
from tests.pipelines.factories import ended, model, reward, started, wire
from tests.pipelines.factories import tokenized_call as _call
from tests.pipelines.log_workload import produce

pytestmark = pytest.mark.kafka


def _episode(
    eid: str, group: str, *, end: bool = True, verdict: str = "pass", sampling: Any = None, size: int = 0
) -> list[Any]:
    extra: dict[str, Any] = {"sampling": sampling} if sampling else {}
    if size:
        extra["metadata"] = {"group_size": size}
    docs = [started(eid, group_id=group, **extra), _call(eid, 1)]
    if end:
        docs += [reward(eid, 2, verdict=verdict, score=None if verdict != "error" else 0.0), ended(eid, 3)]
    return docs


def _folding(kafka: EmbeddedKafka, tmp_path: Path, name: str) -> tuple[str, Callable[..., None]]:
    """``(lake root, send)``: ``send(*episodes)`` produces the episodes' events to a topic of the
    test's own and folds them into the lake."""
    topic = f"t.{name}.{os.getpid()}.{random.getrandbits(24):06x}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2}).ensure_topics()
    cfg = PipelineConfig(bootstrap=kafka.bootstrap, lake_root=str(tmp_path / "lake"), topics=(topic,))

    def send(*episodes: list[Any]) -> None:
        produce(kafka.bootstrap, [(topic, d["episode_id"].encode(), wire(d)) for ep in episodes for d in ep])
        run_once(cfg)

    return cfg.lake_root, send


def test_episodes_open_or_unscored_at_the_parent_are_trained_once_they_are_whole(
    kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    root, send = _folding(kafka, tmp_path, "select")

    send(
        _episode("a1", "ga"), _episode("a2", "ga", verdict="fail"),  # a whole group
        _episode("b", "gb", end=False),  # still running
        _episode("c", "gc", verdict="error"),  # the judge failed on it
        _episode("d1", "gd"), _episode("d2", "gd", end=False),  # half a group
        _episode("e", "ge", sampling={"temperature": 0.7, "extra": {"greedy": True}}),  # greedy evaluation
        _episode("f", "gf", sampling={"temperature": 0.7}),
        _episode("h1", "gh", size=3), _episode("h2", "gh", size=3),  # the third attempt has not started
    )  # fmt: skip
    spec = DatasetSpec(lake=root, judge_name="tests")
    first = load_samples(spec)
    assert sorted(s.episode_id for s in first.samples) == ["a1", "a2", "f"]
    assert {s.episode_id: s.temperature for s in first.samples}["f"] == 0.7
    assert dict(first.skipped) == {
        "incomplete": 2, "reward_error": 1, "group_waiting": 3, "greedy_decoding": 1,
    }  # fmt: skip

    # the running episodes finish: exactly what became trainable since is read, once
    send(
        [reward("b", 2), ended("b", 3)], [reward("d2", 2, verdict="fail"), ended("d2", 3)],
        _episode("h3", "gh", size=3, verdict="fail"),
    )  # fmt: skip
    later = load_samples(DatasetSpec(lake=root, judge_name="tests", since=first.table_versions))
    assert sorted(s.episode_id for s in later.samples) == ["b", "d1", "d2", "h1", "h2", "h3"]
    assert dict(later.skipped) == {}  # what was excluded at the parent's snapshot was counted there
    again = load_samples(DatasetSpec(lake=root, judge_name="tests", since=later.table_versions))
    assert again.samples == []

    # the same snapshot exported for other trainers, read back with the consumer's own reader
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from learners.export import export_dataset

    lineage = export_dataset(DatasetSpec(lake=root, judge_name="tests"), "verl", tmp_path / "verl")
    rl = pq.read_table(tmp_path / "verl" / "train.parquet")
    tokens = pq.read_table(tmp_path / "verl" / "tokens.parquet").to_pylist()
    # each task's prompt once (verl's rollouts sample its attempts), the recorded samples beside it
    assert rl.num_rows == 1 and len(tokens) == lineage["rows"] == 9
    assert set(rl.column_names) == {
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "agent_name",
        "extra_info",
    }
    task = rl.to_pylist()[0]
    assert (
        json.loads(task["reward_model"]["ground_truth"])["task_id"] == task["extra_info"]["task_id"] == "t1"
    )
    assert lineage["table_versions"] == later.table_versions and lineage["judge_version"] == "v1"
    for t in tokens:
        assert t["input_ids"] == [1, 5, 6, 7, 8, 2] and t["prompt_length"] == 3  # as the model_call recorded
        assert t["prompts"] == [1, 5, 6] and t["responses"] == [7, 8, 2]
        # one mask entry and one log-prob per response token
        assert t["response_mask"] == [1, 1, 1]
        assert t["rollout_log_probs"] == pytest.approx([-0.5, -0.2, -0.1])
    by_episode = {t["episode_id"]: t for t in tokens}
    assert by_episode["a2"]["reward"] == 0.0 and by_episode["a1"]["uid"] == "ga"
    # the Hugging Face datasets directory, opened by datasets itself
    import datasets

    hf_lineage = export_dataset(DatasetSpec(lake=root, judge_name="tests"), "hf", tmp_path / "hf")
    ds = datasets.load_from_disk(str(tmp_path / "hf"))
    assert ds.num_rows == hf_lineage["rows"] == 9 and ds.split == "train"
    assert hf_lineage["table_versions"] == later.table_versions
    hf_rows = {r["episode_id"]: r for r in ds}
    for eid, t in by_episode.items():  # token for token what the verl export (and the lake) hold
        r = hf_rows[eid]
        assert r["input_ids"] == t["input_ids"] and r["response_mask"] == t["response_mask"]
        assert r["rollout_log_probs"] == pytest.approx(t["rollout_log_probs"]) and r["uid"] == t["uid"]
        assert r["reward"] == t["reward"] and r["prompt_length"] == t["prompt_length"]
    cli = Path(sys.executable).with_name("trajlake")
    env = {**os.environ, "TRAJLAKE_HOME": str(tmp_path / "home")}
    p = subprocess.run(
        [str(cli), "export", "--format", "trl", "--out", str(tmp_path / "trl"), "--lake", root],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(x) for x in (tmp_path / "trl" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == json.loads((tmp_path / "trl" / "lineage.json").read_text())["rows"] == 9
    again_cli = subprocess.run(
        [str(cli), "export", "--format", "trl", "--out", str(tmp_path / "trl"), "--lake", root],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again_cli.returncode == 2 and "already holds an export" in " ".join(again_cli.stderr.split())


def test_multi_turn_episodes_are_one_sequence_and_a_partial_group_waits_only_so_long(
    kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    import datetime as dt

    from lake import Lake
    from tests.pipelines.factories import T0, call, result

    root, send = _folding(kafka, tmp_path, "turns")

    bash = {
        "id": "call-1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
    }

    def turns(eid: str, group: str, second_prompt: list[int], verdict: str = "pass") -> list[Any]:
        return [
            started(eid, group_id=group, metadata={"group_size": 2}),
            model(eid, 1, completion="a", prompt_token_ids=[1, 5], completion_token_ids=[7, 2],
                  completion_logprobs=[-0.5, -0.1], messages=[{"role": "user", "content": "go"}],
                  tool_calls=[bash]),
            call(eid, 2), result(eid, 3, stdout="ok"),
            model(eid, 4, completion="b", prompt_token_ids=second_prompt, completion_token_ids=[8, 2],
                  completion_logprobs=[-0.3, -0.2]),
            reward(eid, 5, verdict=verdict), ended(eid, 6),
        ]  # fmt: skip

    def at(doc: dict[str, Any], seconds: float) -> dict[str, Any]:
        return {**doc, "ts": (T0 + dt.timedelta(seconds=seconds)).isoformat()}

    send(
        turns("m1", "gm", [1, 5, 7, 2, 40, 41]),  # the history continues: one sequence
        turns("m2", "gm", [1, 5, 7, 3, 40, 41], verdict="fail"),  # the template changed a token: two
        [started("x1", group_id="gx", metadata={"group_size": 2}), _call("x1", 1), reward("x1", 2),
         ended("x1", 3)],  # its group's second member never ends within the bound
        [started("x2", group_id="gx", metadata={"group_size": 2}), _call("x2", 1)],
        # both ended in time, but the judge scores s2 only hours later: whole too late
        [started("s1", group_id="gs"), _call("s1", 1), reward("s1", 2), ended("s1", 3)],
        [started("s2", group_id="gs"), _call("s2", 1), ended("s2", 2)],
        [started("n", group_id="gn"), reward("n", 1), ended("n", 2)],  # a scripted episode: no model call
        [at(d, 3 * 3600) for d in _episode("late", "gl")],  # the log's clock is three hours on
    )  # fmt: skip
    stored = {(r["episode_id"], r["sequence"]): r for r in Lake(root).read("samples").to_pylist()}
    assert stored[("m1", 0)]["response_ids"] == [7, 2, 40, 41, 8, 2]
    assert stored[("m1", 0)]["response_mask"] == [1, 1, 0, 0, 1, 1]
    assert [stored[("m2", i)]["start"] for i in (0, 1)] == ["episode", "history_mismatch"]
    first = load_samples(DatasetSpec(lake=root, judge_name="tests", max_group_wait_s=600))
    by_episode = {(s.episode_id, s.sequence): s for s in first.samples}
    assert sorted(by_episode) == [("late", 0), ("m1", 0), ("m2", 0), ("m2", 1)]
    m1 = by_episode[("m1", 0)]
    assert m1.completion_mask == [1, 1, 0, 0, 1, 1] and m1.behaviour_logprobs == pytest.approx(
        [-0.5, -0.1, 0, 0, -0.3, -0.2]
    )
    assert dict(first.token_history) == {"merged_calls": 1, "history_mismatch": 1}
    # x1 waited too long and x2 is still open; s2 is unscored too long; n has nothing to train on
    assert dict(first.skipped) == {"group_expired": 4, "no_samples": 1}
    waiting = load_samples(DatasetSpec(lake=root, judge_name="tests", max_group_wait_s=None))
    # without a bound: waiting
    assert dict(waiting.skipped) == {"group_waiting": 2, "incomplete": 1, "no_reward": 1, "no_samples": 1}

    # x2 ends (long after x1): the group is whole now, but too late; counted once, never trained
    send([at(reward("x2", 2), 4 * 3600), at(ended("x2", 3), 4 * 3600)], [at(reward("s2", 3), 2 * 3600)])
    later = load_samples(
        DatasetSpec(lake=root, judge_name="tests", since=first.table_versions, max_group_wait_s=600)
    )
    assert later.samples == [] and dict(later.skipped) == {}

    # the export holds the whole sequence with its mask, and the conversation that followed the prompt
    from learners.export import export_dataset

    lineage = export_dataset(DatasetSpec(lake=root, judge_name="tests", max_group_wait_s=600),
                             "trl", tmp_path / "trl")  # fmt: skip
    assert lineage["token_history"] == {"merged_calls": 1, "history_mismatch": 1}
    turns = [r for r in map(json.loads, (tmp_path / "trl" / "train.jsonl").read_text().splitlines())
             if r["episode_id"] == "m1"]  # fmt: skip
    # one row per assistant turn: the completion is that turn; what came before it is context
    assert [[m["content"] for m in r["completion"]] for r in turns] == [["a"], ["b"]]
    assert turns[0]["prompt"] == [{"role": "user", "content": "go"}]
    assert turns[0]["completion"][0]["tool_calls"] == [bash]  # the native tool call, kept
    assert [m["role"] for m in turns[1]["prompt"]] == ["user", "assistant"]


def test_a_group_that_loses_a_member_to_a_row_exclusion_is_dropped_whole(
    kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    """The baseline of a group is its mean reward: over survivors it would be another group's."""
    root, send = _folding(kafka, tmp_path, "whole")
    untrainable = [started("p2", group_id="gp"), model("p2", 1),  # no token data
                   reward("p2", 2, verdict="fail"), ended("p2", 3)]  # fmt: skip
    docs = [*_episode("p1", "gp"), *untrainable, *_episode("q1", "gq"), *_episode("q2", "gq", verdict="fail"),
            *_episode("r1", "gr"), *_episode("r2", "gr", verdict="fail")]  # fmt: skip
    send(docs)
    data = load_samples(DatasetSpec(lake=root, judge_name="tests"))
    assert sorted(s.episode_id for s in data.samples) == ["q1", "q2", "r1", "r2"]
    assert (data.skipped["no_token_data"], data.skipped["partial_group"]) == (1, 1)
    # a filter the learner applies later (policy lag, vocabulary) keeps groups whole too
    assert data.keep([s.episode_id != "r2" for s in data.samples], "policy_lag") == 1
    assert sorted(s.episode_id for s in data.samples) == ["q1", "q2"]
    assert (data.skipped["policy_lag"], data.skipped["partial_group"]) == (1, 2)


def test_a_group_that_loses_a_member_to_an_episode_exclusion_is_dropped_whole(
    kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    """A judge error, an infra error, lost events or no samples in one member: no baseline over the rest."""
    root, send = _folding(kafka, tmp_path, "whole.ep")

    send(
        _episode("a1", "ga"), _episode("a2", "ga", verdict="fail"),  # whole: trained
        _episode("j1", "gj"), _episode("j2", "gj", verdict="fail"), _episode("j3", "gj", verdict="error"),
        _episode("i1", "gi"), [started("i2", group_id="gi"), _call("i2", 1), ended("i2", 2, "infra_error")],
        _episode("p1", "gp"), [started("p2", group_id="gp"), _call("p2", 1), reward("p2", 3), ended("p2", 4)],
        _episode("n1", "gn"), [started("n2", group_id="gn"), reward("n2", 1, verdict="fail"), ended("n2", 2)],
    )  # fmt: skip
    data = load_samples(DatasetSpec(lake=root, judge_name="tests"))
    assert sorted(s.episode_id for s in data.samples) == ["a1", "a2"]
    # each left-out member under its own reason, the members it took with it under partial_group
    # (p2's seq 2 never arrived: a gap; n2 made no model call: no samples, n1 went with it)
    assert dict(data.skipped) == {
        "reward_error": 1, "status:infra_error": 1, "gap": 1, "no_samples": 1, "partial_group": 5,
    }  # fmt: skip

    # the next step reads what became trainable since: these groups stay dropped, counted once
    send(_episode("b1", "gb"), _episode("b2", "gb", verdict="fail"))
    later = load_samples(DatasetSpec(lake=root, judge_name="tests", since=data.table_versions))
    assert sorted(s.episode_id for s in later.samples) == ["b1", "b2"] and dict(later.skipped) == {}
