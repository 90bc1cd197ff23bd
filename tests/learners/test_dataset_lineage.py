"""The learner's side of the loop on a real lake: pinned reads, exclusions, increments, training, lineage."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.kafka_broker import EmbeddedKafka
from ingest.recorder import EpisodeRecorder
from judges import build_judge, load_task
from learners.checkpoints import lineage_chain, load_checkpoint, publish_checkpoint
from learners.dataset import DatasetSpec, load_samples
from learners.trainer import TrainArgs, supervised_warm_start, train
from pipelines import PipelineConfig, run_once
from rollouts import GeneratorPolicy, PolicyUnavailableError, run_episode
from rollouts.runner import ROLLOUT_SPEC
from sandboxes import SandboxBackend, SandboxPool
from trajlake.policy_specs import make_policy

TASKS = Path(__file__).resolve().parents[2] / "tasks"
pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def world(
    kafka: EmbeddedKafka,
    local_backend: SandboxBackend,
    base_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """A topic, a lake, a starting checkpoint and a sandbox pool shared by the tests of this module."""
    root = tmp_path_factory.mktemp("loop")
    topic = f"t.loop.{random.getrandbits(32):08x}"
    learner, curation = f"{topic}.learner", f"{topic}.curation"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 4, learner: 1, curation: 1}).ensure_topics()
    # the judge pays only progress (a correct prefix), so the start has seen the tasks' words: its
    # samples then get some of them right and some not, and groups have rewards to compare
    words = ("sun", "wind", "fish", "abc", "hello", "xyz", "qwer")
    pairs = [(f'Write "{w}" reversed into answer.txt.\n', w[::-1]) for w in words]
    ckpt = supervised_warm_start(pairs, checkpoint_root=str(root / "ckpt"), steps=60, note="test start")
    rec = EpisodeRecorder.open(
        bootstrap=kafka.bootstrap, home=root, worker_id="t", topic=topic, delivery="inline"
    )
    with SandboxPool(local_backend, ROLLOUT_SPEC, max_size=1) as pool:
        yield {"root": root, "topic": topic, "learner": learner, "ckpt": ckpt, "rec": rec, "pool": pool,
               "kafka": kafka, "curation": curation}  # fmt: skip
    rec.close()


def _episodes(world: dict[str, Any], ids: list[str], per_task: int, group: str) -> list[Any]:
    policy = make_policy(f"local:{world['ckpt'].path}?seed=3")
    out = []
    for tid in ids:
        task = load_task(TASKS / "wordplay" / tid)
        for a in range(per_task):
            out.append(
                run_episode(task, policy, world["pool"], world["rec"], group_id=f"{group}:{tid}", attempt=a)
            )
    world["rec"].flush()
    return out


def _fold(world: dict[str, Any]) -> None:
    cfg = PipelineConfig(
        bootstrap=world["kafka"].bootstrap,
        lake_root=str(world["root"] / "lake"),
        topics=(world["topic"], world["learner"], world["curation"]),
        control_topics={"checkpoint": world["learner"], "retraction": world["curation"]},
    )
    run_once(cfg)


def test_pinned_reads_exclusions_increments_training_and_lineage(world: dict[str, Any]) -> None:
    lake = str(world["root"] / "lake")
    judge = build_judge(load_task(TASKS / "wordplay" / "wordplay-001").spec.judge)
    first = _episodes(world, ["wordplay-001", "wordplay-002"], 3, "g1")
    assert all(o.status in ("success", "failure") for o in first)
    # an infra_error episode: its policy's server is gone mid-episode
    dead = GeneratorPolicy(
        lambda p: (_ for _ in ()).throw(PolicyUnavailableError("model server gone")),
        policy_id="broken",
        policy_version="x",
    )
    bad = run_episode(load_task(TASKS / "wordplay" / "wordplay-003"), dead, world["pool"], world["rec"])
    world["rec"].flush()
    assert bad.status == "infra_error"
    _fold(world)

    spec = DatasetSpec(lake=lake, judge_name=judge.name)
    v1 = load_samples(spec)
    assert v1.judge_version == judge.version
    assert len(v1.samples) == 6 and v1.episodes == 6
    assert v1.skipped["status:infra_error"] == 1  # never reaches the loss
    s = v1.samples[0]
    assert len(s.completion_ids) == len(s.behaviour_logprobs) > 0 and s.prompt_ids[0] == 1
    assert {x.group_id for x in v1.samples} == {"g1:wordplay-001", "g1:wordplay-002"}

    # more episodes land in the lake; a read pinned at the old versions does not see them
    _episodes(world, ["wordplay-004"], 2, "g2")
    _fold(world)
    pinned = load_samples(DatasetSpec(lake=lake, judge_name=judge.name, versions=v1.table_versions))
    assert [x.episode_id for x in pinned.samples] == [x.episode_id for x in v1.samples]
    now = load_samples(spec)
    assert len(now.samples) == 8 and now.table_versions["episodes"] > v1.table_versions["episodes"]
    new = load_samples(DatasetSpec(lake=lake, judge_name=judge.name, since=v1.table_versions))
    assert {x.group_id for x in new.samples} == {"g2:wordplay-004"}

    # learner steps in both backends, each reading only what is new since its parent; a group whose
    # episodes all got one reward is left out (its advantages are all 0) and counted
    root = world["root"]
    rewards: dict[str, set[float]] = {}
    for x in now.samples:
        rewards.setdefault(x.group_id, set()).add(x.reward)
    flat = sum(1 for x in now.samples if len(rewards[x.group_id]) == 1)
    for backend in ("torch", "jax"):
        res = train(
            TrainArgs(
                lake=lake,
                checkpoint_root=str(root / "ckpt"),
                judge_name=judge.name,
                parent=world["ckpt"].path,
                backend=backend,
                epochs=1,
                batch_size=4,
            )
        )
        assert res.checkpoint is not None and res.samples == 8 - flat and res.metrics
        excluded = res.checkpoint.lineage.metrics["samples_excluded"]
        assert excluded.get("zero_advantage_group", 0) == flat
        info, _, weights = load_checkpoint(res.checkpoint.path)
        assert info.lineage.table_versions == now.table_versions
        assert (
            info.lineage.judge_version == judge.version
            and info.lineage.parent_id == world["ckpt"].checkpoint_id
        )
        assert set(weights) == set(load_checkpoint(world["ckpt"].path)[2])
    # the checkpoints table is a projection of the log: published, then folded
    for info in (world["ckpt"], res.checkpoint):
        publish_checkpoint(world["kafka"].bootstrap, world["learner"], info)
    _fold(world)
    chain = lineage_chain(lake, res.checkpoint.checkpoint_id)
    assert [c["checkpoint_id"] for c in chain] == [res.checkpoint.checkpoint_id, world["ckpt"].checkpoint_id]
    assert '"episodes"' in chain[0]["table_versions"] and chain[0]["judge_version"] == judge.version
    assert chain[1]["table_versions"] == "{}" and "test start" in chain[1]["metrics"]
    # nothing new since the latest checkpoint: the next step has nothing to learn from
    again = train(
        TrainArgs(
            lake=lake,
            checkpoint_root=str(root / "ckpt"),
            judge_name=judge.name,
            parent=res.checkpoint.path,
            epochs=1,
        )
    )
    assert again.checkpoint is None and again.samples == 0
    # the selection is part of the lineage: what the step read, and the judge it kept
    selection = res.checkpoint.lineage.metrics["selection"]
    assert selection["lake"] == str(Path(lake).resolve()) and selection["tasks"] is None
    # (its parent, a warm start, read no lake: the version most rewards have)
    assert selection["judge"] == {"name": judge.name, "version": judge.version, "from": "most_common"}
    # an incremental read with another selection or another lake would skip episodes for good: refused
    from learners.errors import LearnerConfigError

    with pytest.raises(
        LearnerConfigError, match=r"other data than its parent .*tasks None -> \['wordplay-004'\]"
    ):
        train(TrainArgs(lake=lake, checkpoint_root=str(root / "ckpt"), judge_name=judge.name,
                        parent=res.checkpoint.path, task_ids=["wordplay-004"]))  # fmt: skip
    # another judge's rewards would replay the parent's snapshot with that judge at the parent's version
    with pytest.raises(LearnerConfigError, match=r"judge 'composite', this step reads 'answer'"):
        train(TrainArgs(lake=lake, checkpoint_root=str(root / "ckpt"), judge_name="answer",
                        parent=res.checkpoint.path))  # fmt: skip
    with pytest.raises(LearnerConfigError, match=r"other data than .*families None -> \['wordplay'\]"):
        train(TrainArgs(lake=lake, checkpoint_root=str(root / "ckpt"), judge_name=judge.name,
                        parent=res.checkpoint.path, families=["wordplay"]))  # fmt: skip
    # the family filter reaches the read: this lake's episodes are all wordplay
    assert len(load_samples(DatasetSpec(lake=lake, judge_name=judge.name, families=frozenset({"wordplay"}))))
    other_family = train(TrainArgs(lake=lake, checkpoint_root=str(root / "ckpt"), judge_name=judge.name,
                                   parent=res.checkpoint.path, incremental=False,
                                   families=["reverse"]))  # fmt: skip
    assert other_family.checkpoint is None and other_family.samples == 0
    with pytest.raises(LearnerConfigError, match="needs the parent's lake"):
        other = str(root / "other-lake")
        train(TrainArgs(lake=other, checkpoint_root=str(root / "ckpt"), judge_name=judge.name,
                        parent=res.checkpoint.path))  # fmt: skip
    # a child of a lake-trained parent keeps its judge version unless told otherwise, and says so
    _episodes(world, ["wordplay-005"], 2, "g3")
    _fold(world)
    # with a fixed KL reference (the warm start), distinct from the proximal policy (the parent): the
    # penalty is not 0 at the first minibatch, where the model still is the parent
    child_args = TrainArgs(lake=lake, checkpoint_root=str(root / "ckpt"), judge_name=judge.name, epochs=1,
                           parent=res.checkpoint.path, drop_zero_advantage_groups=False, kl_coef=0.1,
                           kl_reference=world["ckpt"].path, clip_eps_high=0.28,
                           scale_advantages=False)  # fmt: skip
    child = train(child_args)
    assert child.checkpoint is not None and child.metrics[0]["kl"] > 0.0
    assert child.checkpoint.lineage.metrics["selection"]["judge"]["from"] == "parent"


def test_a_retraction_leaves_the_next_dataset_and_names_the_checkpoints_that_trained_on_it(
    world: dict[str, Any],
) -> None:
    import datetime as dt

    from ingest.publish import publish_events
    from learners.retractions import impacted_checkpoints
    from schemas.control import RETRACTION, control_event

    lake, root = str(world["root"] / "lake"), world["root"]
    judge = build_judge(load_task(TASKS / "wordplay" / "wordplay-006").spec.judge)
    only = ["wordplay-006", "wordplay-007"]
    first = _episodes(world, only, 3, "r1")
    _fold(world)
    args = dict(lake=lake, checkpoint_root=str(root / "ckpt"), judge_name=judge.name, task_ids=only, epochs=1,
                drop_zero_advantage_groups=False)  # fmt: skip
    a = train(TrainArgs(**args, parent=world["ckpt"].path, incremental=False)).checkpoint  # type: ignore[arg-type]
    assert a is not None
    _episodes(world, only, 3, "r2")
    _fold(world)
    b = train(TrainArgs(**args, parent=a.path)).checkpoint  # type: ignore[arg-type]
    assert b is not None and b.lineage.parent_id == a.checkpoint_id
    for info in (world["ckpt"], a, b):
        publish_checkpoint(world["kafka"].bootstrap, world["learner"], info)
    _fold(world)
    before = load_samples(DatasetSpec(lake=lake, judge_name=judge.name, task_ids=frozenset(only)))
    assert first[0].episode_id in {s.episode_id for s in before.samples}

    # a confirmed hack: one episode of the first round is taken out of training
    now = dt.datetime.now(dt.UTC)
    row = {"retraction_id": "hack-1", "scope": "episode", "target": first[0].episode_id,
           "reason": "confirmed hack", "retracted_by": "tester", "retracted_at": now}  # fmt: skip
    publish_events(
        world["kafka"].bootstrap, world["curation"], [control_event(RETRACTION, row, "retraction")]
    )
    _fold(world)
    after = load_samples(DatasetSpec(lake=lake, judge_name=judge.name, task_ids=frozenset(only)))
    ids = {s.episode_id for s in after.samples}
    group = {o.episode_id for o in first if o.group_id == first[0].group_id}
    assert not ids & group  # the episode and its group (its baseline included the hack) are out
    assert after.skipped["retracted"] == 1 and after.skipped["partial_group"] >= len(group) - 1
    assert ids == {s.episode_id for s in before.samples} - group
    assert "retractions" in after.table_versions  # pinned like the rest: a replayed read sees the same
    # the checkpoint that trained on it, and its child, which inherits its weights
    impacted = {c["checkpoint_id"]: c for c in impacted_checkpoints(lake, "hack-1")}
    assert set(impacted) == {a.checkpoint_id, b.checkpoint_id}
    assert impacted[a.checkpoint_id]["trained_on_retracted"] == 1 and impacted[a.checkpoint_id]["via"] is None
    assert (
        impacted[b.checkpoint_id]["trained_on_retracted"] == 0
        and impacted[b.checkpoint_id]["via"] == a.checkpoint_id
    )
    # a retraction of the second round's group names only the checkpoint that read it
    late = {"retraction_id": "broken-2", "scope": "group", "target": f"r2:{only[1]}", "reason": "broken task",
            "retracted_by": "tester", "retracted_at": dt.datetime.now(dt.UTC)}  # fmt: skip
    publish_events(
        world["kafka"].bootstrap, world["curation"], [control_event(RETRACTION, late, "retraction")]
    )
    _fold(world)
    assert [c["checkpoint_id"] for c in impacted_checkpoints(lake, "broken-2")] == [b.checkpoint_id]
