"""``GET /episodes/{id}/training`` against what the learner really trained on.

The lake is folded by the real pipeline from episodes chosen to meet the learner's rules one by one
(a whole group with a spread of rewards, a group whose rewards are all equal, a judge error, an
infra error, a member without token data, a group waiting for a member, an evaluation episode, a
retraction). Two real learner steps (``learners.trainer.train``, a tiny model on the CPU) train
on it, the second incrementally from the first, and publish their checkpoints to the log, which the
pipeline folds too. What each step trained on is taken from the step itself (the sample set it
handed to ``update``), so the API's answer, recomputed from the lineage, is checked against the
learner's own decision for every episode and checkpoint.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api import create_app
from ingest.kafka_broker import EmbeddedKafka
from pipelines import PipelineConfig, run_once
from schemas.codec import serialize_event
from tests.pipelines.factories import ended, model, reward, started, wire
from tests.pipelines.factories import tokenized_call as _call
from tests.pipelines.log_workload import produce

pytestmark = pytest.mark.kafka

TINY = {"vocab_size": 98, "d_model": 8, "n_layers": 1, "n_heads": 2, "d_ff": 16, "max_len": 16}


def _episode(
    eid: str, group: str, verdict: str = "pass", *, end: bool = True, status: str = "success", **meta: Any
) -> list[dict[str, Any]]:
    docs = [started(eid, group_id=group, **({"metadata": meta} if meta else {})), _call(eid, 1)]
    if end:
        score = 0.0 if verdict == "error" else None
        docs += [reward(eid, 2, verdict=verdict, score=score), ended(eid, 3, status)]
    return docs


@dataclass
class LearnerLake:
    root: Path
    checkpoints: list[str]
    """The two steps' checkpoint ids, oldest first."""
    trained: dict[str, set[str]]
    """Checkpoint id -> the episodes its step handed to ``update``."""
    episodes: list[str]


@pytest.fixture(scope="module")
def learner_lake(kafka: EmbeddedKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LearnerLake]:
    import learners.trainer as trainer
    from learners.checkpoints import CheckpointInfo
    from schemas.control import CHECKPOINT, RETRACTION, control_event

    tmp = tmp_path_factory.mktemp("learner-view")
    tag = f"{os.getpid()}.{random.getrandbits(24):06x}"
    topic, learner, curation = f"api.train.{tag}", f"api.train.learner.{tag}", f"api.train.curation.{tag}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2, learner: 1, curation: 1}).ensure_topics()
    cfg = PipelineConfig(
        bootstrap=kafka.bootstrap,
        lake_root=str(tmp / "lake"),
        topics=(topic, learner, curation),
        control_topics={"checkpoint": learner, "retraction": curation},
        worker_log=str(tmp / "workers.log"),
    )

    def fold(*records: tuple[str, bytes, bytes]) -> None:
        produce(kafka.bootstrap, list(records))
        run_once(cfg)

    def episodes(*eps: list[dict[str, Any]]) -> list[tuple[str, bytes, bytes]]:
        return [(topic, d["episode_id"].encode(), wire(d)) for ep in eps for d in ep]

    def published(info: CheckpointInfo) -> tuple[str, bytes, bytes]:
        e = control_event(CHECKPOINT, info.row(), "learner")
        return (learner, e.episode_id.encode(), serialize_event(e))

    no_tokens = [
        started("p2", group_id="gp"),
        model("p2", 1),
        reward("p2", 2, verdict="fail"),
        ended("p2", 3),
    ]
    fold(
        *episodes(
            _episode("a1", "ga"), _episode("a2", "ga", "fail"),  # trained
            _episode("z1", "gz"), _episode("z2", "gz"),  # every reward 1: no advantage
            _episode("j1", "gj"), _episode("j2", "gj", "error"),  # the judge failed on j2
            _episode("i1", "gi"), _episode("i2", "gi", status="infra_error"),  # a crashed sandbox
            _episode("p1", "gp"), no_tokens,  # p2's model call has no token ids
            _episode("w1", "gw"), _episode("w2", "gw", end=False),  # w2 still running
            _episode("e1", "ge", source="eval"),  # an evaluation run's
        )
    )  # fmt: skip
    trained: dict[str, set[str]] = {}
    update = trainer.update

    def spy(cfg_: Any, weights: Any, samples: Any, args: Any, **kw: Any) -> Any:
        trained["next"] = set(samples.table.column("episode_id").to_pylist())
        return update(cfg_, weights, samples, args, **kw)

    args: dict[str, Any] = {"lake": cfg.lake_root, "checkpoint_root": str(tmp / "ckpt"),
                            "judge_name": "tests", "model": TINY, "epochs": 1, "batch_size": 8,
                            "device": "cpu"}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trainer, "update", spy)
        first = trainer.train(trainer.TrainArgs(**args)).checkpoint
        assert first is not None
        trained[first.checkpoint_id] = trained.pop("next")
        retraction = {"retraction_id": "hack-r1", "scope": "episode", "target": "r1",
                      "reason": "confirmed hack", "retracted_by": "tester",
                      "retracted_at": dt.datetime.now(dt.UTC)}  # fmt: skip
        r = control_event(RETRACTION, retraction, "retraction")
        fold(
            *episodes(
                [reward("w2", 2, verdict="fail"), ended("w2", 3)],  # gw is whole now
                _episode("b1", "gb"), _episode("b2", "gb", "fail"),
                _episode("r1", "gr"), _episode("r2", "gr", "fail"),
            ),
            (curation, r.episode_id.encode(), serialize_event(r)),
            published(first),
        )  # fmt: skip
        second = trainer.train(trainer.TrainArgs(**args, parent=first.path)).checkpoint
        assert second is not None and second.lineage.parent_id == first.checkpoint_id
        trained[second.checkpoint_id] = trained.pop("next")
    fold(published(second), *episodes(_episode("late", "gl")))  # after every step
    ids = [
        "a1",
        "a2",
        "z1",
        "z2",
        "j1",
        "j2",
        "i1",
        "i2",
        "p1",
        "p2",
        "w1",
        "w2",
        "e1",
        "b1",
        "b2",
        "r1",
        "r2",
    ]
    yield LearnerLake(tmp / "lake", [first.checkpoint_id, second.checkpoint_id], trained, ids)


@pytest.fixture(scope="module")
def learner_client(learner_lake: LearnerLake) -> Iterator[TestClient]:
    with TestClient(create_app(learner_lake.root, token="t")) as c:
        c.headers["Authorization"] = "Bearer t"
        yield c


def _verdicts(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["checkpoint_id"]: v for v in body["checkpoints"]}


def test_the_steps_trained_on_what_the_lake_was_built_to_give_them(learner_lake: LearnerLake) -> None:
    first, second = learner_lake.checkpoints
    assert learner_lake.trained == {first: {"a1", "a2"}, second: {"w1", "w2", "b1", "b2"}}


def test_every_episode_is_answered_as_each_learner_step_decided(
    learner_lake: LearnerLake, learner_client: TestClient
) -> None:
    first, second = learner_lake.checkpoints
    for eid in learner_lake.episodes:
        r = learner_client.get(f"/episodes/{eid}/training")
        assert r.status_code == 200, r.text
        body = r.json()
        verdicts = _verdicts(body)
        for ck, trained in learner_lake.trained.items():
            if ck == first and eid in ("b1", "b2", "r1", "r2"):
                assert ck not in verdicts  # folded after the first step read the lake
                continue
            assert verdicts[ck]["trained"] is (eid in trained), (eid, ck, verdicts[ck])
        assert body["trained_by"] == [ck for ck in (second, first) if eid in learner_lake.trained[ck]]


@pytest.mark.parametrize(
    ("eid", "at_first", "at_second", "summary"),
    [
        ("z1", "zero_advantage_group", "read_by_parent", "zero_advantage_group"),
        ("j2", "reward_error", "reward_error", "reward_error"),
        ("j1", "partial_group", "partial_group", "partial_group"),
        ("i2", "status:infra_error", "status:infra_error", "status:infra_error"),
        ("i1", "partial_group", "partial_group", "partial_group"),
        # a sample row's problem is the dataset's second sieve: the parent's snapshot held gp trainable
        ("p2", "no_token_data", "read_by_parent", "no_token_data"),
        ("p1", "partial_group", "read_by_parent", "partial_group"),
        ("e1", "eval", "eval", "eval"),
        ("r1", None, "retracted", "retracted"),
        ("r2", None, "partial_group", "partial_group"),
    ],
)
def test_why_an_episode_was_not_trained_on_is_the_learners_reason(
    learner_lake: LearnerLake,
    learner_client: TestClient,
    eid: str,
    at_first: str | None,
    at_second: str,
    summary: str,
) -> None:
    first, second = learner_lake.checkpoints
    body = learner_client.get(f"/episodes/{eid}/training").json()
    verdicts = _verdicts(body)
    assert verdicts.get(first, {}).get("reason") == at_first
    assert verdicts[second]["reason"] == at_second
    assert (body["trained_by"], body["reason"]) == ([], summary)


def test_the_details_name_what_took_the_group_out(
    learner_lake: LearnerLake, learner_client: TestClient
) -> None:
    first, second = learner_lake.checkpoints
    j1 = _verdicts(learner_client.get("/episodes/j1/training").json())[first]
    assert (
        j1["detail"]
        == "its group gj lost j2 (reward_error): a baseline over the rest would not be the group's"
    )
    p1 = _verdicts(learner_client.get("/episodes/p1/training").json())[first]
    assert (
        p1["detail"]
        == "its group gp lost p2 (no_token_data): a baseline over the rest would not be the group's"
    )
    r1 = learner_client.get("/episodes/r1/training").json()
    assert (
        _verdicts(r1)[second]["detail"]
        == "retracted (hack-r1: confirmed hack) in the retractions the checkpoint read"
    )
    assert [x["retraction_id"] for x in r1["retractions"]] == ["hack-r1"]
    w1 = _verdicts(learner_client.get("/episodes/w1/training").json())
    assert (w1[first]["reason"], w1[first]["detail"]) == (
        "group_waiting",
        "its group gw was still waiting for members (w2 (incomplete))",
    )


def test_a_trained_episode_has_its_reward_advantage_and_sample_rows(
    learner_lake: LearnerLake, learner_client: TestClient
) -> None:
    first, second = learner_lake.checkpoints
    body = learner_client.get("/episodes/a2/training").json()
    assert body["trained_by"] == [first] and body["reason"] is None
    v = _verdicts(body)
    assert v[first]["reward"] == 0.0 and v[first]["advantage"] == pytest.approx(-1.0, abs=1e-5)
    assert v[first]["group_rewards"] == {"a1": 1.0, "a2": 0.0} and v[first]["sequences"] == 1
    assert v[second]["reason"] == "read_by_parent" and v[second]["trained"] is False
    [row] = body["samples"]
    assert row | {"mean_logprob": None} == {
        "sequence": 0, "start": "episode", "first_seq": 1, "last_seq": 1, "num_calls": 1, "problem": None,
        "group_id": "ga", "policy_version": "3", "temperature": 1.0, "top_p": None, "top_k": None,
        "prompt_tokens": 3, "response_tokens": 3, "loss_tokens": 3, "mean_logprob": None,
    }  # fmt: skip
    assert row["mean_logprob"] == pytest.approx((-0.5 - 0.2 - 0.1) / 3)
    assert body["versions"]["checkpoints"] is not None and body["checkpoints_not_holding"] == 0


def test_an_episode_no_checkpoint_has_read_yet_says_so(learner_client: TestClient) -> None:
    body = learner_client.get("/episodes/late/training").json()
    assert (body["trained_by"], body["checkpoints"], body["checkpoints_not_holding"]) == ([], [], 2)
    assert (body["reason"], body["detail"]) == ("not_read_yet", "no checkpoint's snapshot holds it yet")
    assert [s["group_id"] for s in body["samples"]] == ["gl"]


def test_an_unknown_episode_is_a_404_in_the_apps_error_shape(learner_client: TestClient) -> None:
    r = learner_client.get("/episodes/no-such-episode/training")
    assert r.status_code == 404
    assert r.json() == {"error": "not_found", "detail": "no episode 'no-such-episode' in the episodes table"}
    assert (
        learner_client.get("/episodes/a1/training", headers={"Authorization": "Bearer wrong"}).status_code
        == 401
    )
