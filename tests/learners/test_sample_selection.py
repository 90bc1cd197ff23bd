"""What the dataset selects from folded tables: nothing lost, nothing twice, every exclusion counted."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from ingest.kafka_broker import EmbeddedKafka
from learners.dataset import DatasetSpec, load_samples
from pipelines import PipelineConfig, run_once
from tests.pipelines.factories import ended, model, reward, started, wire
from tests.pipelines.log_workload import produce

pytestmark = pytest.mark.kafka


def _call(eid: str, seq: int) -> dict[str, Any]:
    return model(
        eid,
        seq,
        prompt_token_ids=[1, 5, 6],
        completion_token_ids=[7, 8, 2],
        completion_logprobs=[-0.5, -0.2, -0.1],
    )


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


def test_episodes_open_or_unscored_at_the_parent_are_trained_once_they_are_whole(
    kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    topic = f"t.select.{os.getpid()}.{random.getrandbits(24):06x}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2}).ensure_topics()
    cfg = PipelineConfig(bootstrap=kafka.bootstrap, lake_root=str(tmp_path / "lake"), topics=(topic,))

    def send(*episodes: list[Any]) -> None:
        produce(kafka.bootstrap, [(topic, d["episode_id"].encode(), wire(d)) for ep in episodes for d in ep])
        run_once(cfg)

    send(
        _episode("a1", "ga"), _episode("a2", "ga", verdict="fail"),  # a whole group
        _episode("b", "gb", end=False),  # still running
        _episode("c", "gc", verdict="error"),  # the judge failed on it
        _episode("d1", "gd"), _episode("d2", "gd", end=False),  # half a group
        _episode("e", "ge", sampling={"temperature": 0.7, "extra": {"greedy": True}}),  # greedy evaluation
        _episode("f", "gf", sampling={"temperature": 0.7}),
        _episode("h1", "gh", size=3), _episode("h2", "gh", size=3),  # the third attempt has not started
    )  # fmt: skip
    spec = DatasetSpec(lake=cfg.lake_root, judge_name="tests")
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
    later = load_samples(DatasetSpec(lake=cfg.lake_root, judge_name="tests", since=first.table_versions))
    assert sorted(s.episode_id for s in later.samples) == ["b", "d1", "d2", "h1", "h2", "h3"]
    assert dict(later.skipped) == {}  # what was excluded at the parent's snapshot was counted there
    again = load_samples(DatasetSpec(lake=cfg.lake_root, judge_name="tests", since=later.table_versions))
    assert again.samples == []

    # the same snapshot exported for other trainers, read back with the consumer's own reader
    import json
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from learners.export import export_dataset

    lineage = export_dataset(DatasetSpec(lake=cfg.lake_root, judge_name="tests"), "verl", tmp_path / "verl")
    rl = pq.read_table(tmp_path / "verl" / "train.parquet")
    tokens = pq.read_table(tmp_path / "verl" / "tokens.parquet").to_pylist()
    assert rl.num_rows == len(tokens) == lineage["rows"] == 9
    assert set(rl.column_names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert lineage["table_versions"] == later.table_versions and lineage["judge_version"] == "v1"
    for t in tokens:
        assert t["input_ids"] == [1, 5, 6, 7, 8, 2] and t["prompt_length"] == 3  # as the model_call recorded
        assert t["response_mask"] == [0, 0, 0, 1, 1, 1]
        assert t["rollout_log_probs"] == pytest.approx([-0.5, -0.2, -0.1])
    by_episode = {t["episode_id"]: t for t in tokens}
    assert by_episode["a2"]["reward"] == 0.0 and by_episode["a1"]["uid"] == "ga"
    # the Hugging Face datasets directory, opened by datasets itself
    import datasets

    hf_lineage = export_dataset(DatasetSpec(lake=cfg.lake_root, judge_name="tests"), "hf", tmp_path / "hf")
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
        [str(cli), "export", "--format", "trl", "--out", str(tmp_path / "trl"), "--lake", cfg.lake_root],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(x) for x in (tmp_path / "trl" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == json.loads((tmp_path / "trl" / "lineage.json").read_text())["rows"] == 9
    again_cli = subprocess.run(
        [str(cli), "export", "--format", "trl", "--out", str(tmp_path / "trl"), "--lake", cfg.lake_root],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again_cli.returncode == 2 and "already holds an export" in " ".join(again_cli.stderr.split())
