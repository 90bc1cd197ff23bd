"""Re-judge jobs against a real broker, real sandboxes and a real lake.

Episodes are rolled out on a pyfix task (final states archived), folded, then
scored again by a different judge version: the new judgements become events,
land beside the old ones, flip what the new judge sees differently, and a
repeated or resumed run adds nothing twice.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.blobs import BlobStore
from ingest.kafka_broker import EmbeddedKafka
from ingest.kafka_sink import KafkaSink, KafkaSinkConfig
from ingest.log_reader import read_events
from ingest.recorder import EpisodeRecorder
from judges import load_task
from judges.tasks import Task
from lake import Lake
from pipelines import PipelineConfig, run_once
from pipelines.rejudge import RejudgeError, RejudgeSelection, new_run_id, rejudge, run_epoch_ms
from rollouts import ScriptedPolicy, run_episode
from rollouts.runner import ROLLOUT_SPEC
from sandboxes import SandboxBackend, SandboxPool

TASKS = Path(__file__).resolve().parents[2] / "tasks"

# The unfixed code passes these two hidden tests and fails the others: a judge
# that only runs them lets the do-nothing episode pass.
LENIENT = {"name": "tests", "config": {"extra_args": ["-k", "blank_values or leading_question"]}}

pytestmark = pytest.mark.kafka


@pytest.fixture
def task(tmp_path: Path) -> Task:
    dest = tmp_path / "tasks" / "pyfix" / "pyfix-004"
    shutil.copytree(TASKS / "pyfix" / "pyfix-004", dest)
    shutil.copy(TASKS / "pyfix" / "family.yaml", dest.parent / "family.yaml")
    return load_task(dest)


@pytest.fixture
def pool(local_backend: SandboxBackend, base_image: str) -> Iterator[SandboxPool]:
    with SandboxPool(local_backend, ROLLOUT_SPEC, max_size=2) as p:
        yield p


class World:
    """A recorded, folded set of episodes and what is needed to re-judge them."""

    def __init__(
        self, kafka: EmbeddedKafka, topic: str, tmp_path: Path, task: Task, pool: SandboxPool
    ) -> None:
        self.kafka, self.task, self.pool = kafka, task, pool
        self.episodes_topic = topic
        self.judgements_topic = topic + ".judgements"
        EmbeddedKafka(kafka.home, kafka.bootstrap, topics={self.judgements_topic: 8}).ensure_topics()
        self.home = tmp_path
        self.lake = Lake(tmp_path / "lake")
        self.cfg = PipelineConfig(
            bootstrap=kafka.bootstrap,
            lake_root=self.lake.root,
            topics=(self.episodes_topic, self.judgements_topic),
        )
        self.blobs = BlobStore(str(tmp_path / "blobs"))

    def fold(self) -> None:
        run_once(self.cfg)

    def rejudge(self, **kw: object) -> object:
        sink = KafkaSink(KafkaSinkConfig(bootstrap_servers=self.kafka.bootstrap))
        try:
            return rejudge(
                self.lake,
                {self.task.id: self.task},
                self.pool,
                sink,
                self.blobs,
                topic=self.judgements_topic,
                **kw,  # type: ignore[arg-type]
            )
        finally:
            sink.close()

    def rewards(self) -> list[dict[str, object]]:
        return self.lake.read("rewards").to_pylist()


@pytest.fixture
def world(kafka: EmbeddedKafka, topic: str, tmp_path: Path, task: Task, pool: SandboxPool) -> World:
    w = World(kafka, topic, tmp_path, task, pool)
    rec = EpisodeRecorder.open(
        bootstrap=kafka.bootstrap, home=tmp_path, worker_id="w", topic=topic, delivery="inline"
    )
    try:
        w.fixed = [
            run_episode(task, ScriptedPolicy(["apply_reference"]), pool, rec).episode_id for _ in range(2)
        ]
        w.idle = run_episode(task, ScriptedPolicy([{"bash": "ls"}]), pool, rec).episode_id
        # an episode recorded without a final state (e.g. by an older worker): its tool calls rebuild it
        with rec.episode(task=task.ref, policy={"id": "old-worker"}) as ep:
            ep.tool_result(ep.tool_call("bash", {"command": "echo noted > NOTES.txt"}), exit_code=0)
            ep.reward(judge_name="composite", judge_version="v0", score=1.0, verdict="pass")
        w.stateless = ep.episode_id
        rec.flush()
    finally:
        rec.close()
    w.fold()
    return w


def test_rejudge_scores_old_episodes_with_a_new_judge_version(world: World) -> None:
    before = world.rewards()
    assert {r["judge_name"] for r in before} == {"composite"} and len(before) == 4
    report = world.rejudge(judge_spec=LENIENT)
    assert report.count("judged") == 4 and report.count("error") == 0  # type: ignore[attr-defined]
    (rebuilt,) = [i for i in report.items if i.episode_id == world.stateless]  # type: ignore[attr-defined]
    assert rebuilt.reason == "final state rebuilt by executing its 1 tool calls again"
    # compared with the online composite verdicts: the idle episode flips fail -> pass
    assert report.flips() == {("pass", "pass"): 3, ("fail", "pass"): 1}  # type: ignore[attr-defined]
    world.fold()
    after = world.rewards()
    new = [r for r in after if r["judge_name"] == "tests"]
    assert len(new) == 4 and {r["source"] for r in new} == {"rejudge"}
    assert {r["rejudge_run_id"] for r in new} == {report.run_id}  # type: ignore[attr-defined]
    # the judgement of the rebuilt state says so in its evidence; the archived ones do not
    rebuilt_says = {r["episode_id"]: "final_state" in json.loads(r["evidence"] or "{}") for r in new}
    assert rebuilt_says == {e: e == world.stateless for e in [*world.fixed, world.idle, world.stateless]}
    assert {r["episode_id"]: r["verdict"] for r in new} == {
        e: "pass" for e in [*world.fixed, world.idle, world.stateless]
    }
    # the old judgements stay as they were, beside the new ones
    old = sorted(
        (r["episode_id"], r["judge_version"], r["verdict"]) for r in after if r["judge_name"] == "composite"
    )
    assert old == sorted((r["episode_id"], r["judge_version"], r["verdict"]) for r in before)
    # failure attribution follows the judge version: the idle episode failed under the old one only
    failures = {(f["episode_id"], f["judge_name"]) for f in world.lake.read("failures").to_pylist()}
    assert (world.idle, "composite") in failures and (world.idle, "tests") not in failures


def test_a_repeated_run_adds_nothing_and_a_resumed_one_dedups(world: World) -> None:
    first = world.rejudge(judge_spec=LENIENT)
    world.fold()
    again = world.rejudge(judge_spec=LENIENT)
    assert again.count("judged") == 0  # type: ignore[attr-defined]
    assert {i.reason.split(":")[0] for i in again.items} == {"already scored"}  # type: ignore[attr-defined]
    # a crashed run resumed under its id re-sends the same event ids: the lake keeps one of each
    resumed = world.rejudge(judge_spec=LENIENT, run_id=first.run_id, force=True)  # type: ignore[attr-defined]
    assert resumed.count("judged") == 4  # type: ignore[attr-defined]
    assert sorted(i.event_id for i in resumed.items if i.event_id) == sorted(  # type: ignore[attr-defined]
        i.event_id
        for i in first.items
        if i.event_id  # type: ignore[attr-defined]
    )
    sent = list(read_events(world.kafka.bootstrap, world.judgements_topic))
    assert len(sent) == 8  # both sends are in the log ...
    world.fold()
    events = world.lake.read("events", where=f"topic = '{world.judgements_topic}'").to_pylist()
    assert len(events) == 4 and len({e["event_id"] for e in events}) == 4  # ... and folded once
    # stamped with the run's start, so a resume on another day re-sends byte-identical events
    # into the same event_date partition (the bronze dedup key is event_id + event_date)
    start = dt.datetime.fromtimestamp(run_epoch_ms(first.run_id) / 1000, dt.UTC)  # type: ignore[attr-defined]
    assert {e["ts"] for e in events} == {start}
    assert len([r for r in world.rewards() if r["judge_name"] == "tests"]) == 4


def test_the_task_judge_is_the_default_and_unchanged_versions_are_skipped(world: World) -> None:
    report = world.rejudge(selection=RejudgeSelection(episode_ids=(world.idle, world.fixed[0])))
    # same code, same spec: the same version already scored both
    assert [i.outcome for i in report.items] == ["skipped", "skipped"]  # type: ignore[attr-defined]
    forced = world.rejudge(selection=RejudgeSelection(episode_ids=(world.idle,)), force=True)
    (item,) = forced.items  # type: ignore[attr-defined]
    assert item.outcome == "judged" and item.verdict == "fail" and item.previous_verdict == "fail"


def test_bad_requests_fail_before_any_work(world: World, tmp_path: Path) -> None:
    with pytest.raises(RejudgeError, match="run ids look like"):
        world.rejudge(run_id="nope")
    with pytest.raises(RejudgeError, match="has no version 999"):
        world.rejudge(selection=RejudgeSelection(versions={"episodes": 999}))
    with pytest.raises(RejudgeError, match="fold the log first"):
        rejudge(Lake(tmp_path / "empty"), {}, world.pool, KafkaSink(), world.blobs, topic="x")
    rid = new_run_id()
    assert run_epoch_ms(rid) > 1_700_000_000_000
    # a selection that matches nothing is an empty report, not an error
    assert world.rejudge(selection=RejudgeSelection(task_ids=("no-such-task",))).items == []  # type: ignore[attr-defined]


def test_one_unreadable_final_state_is_an_error_item_and_the_run_goes_on(world: World) -> None:
    ref = next(
        json.loads(r["payload"])["final_state_ref"]
        for r in world.lake.read(
            "events", where=f"episode_id = '{world.idle}' AND type = 'episode_ended'"
        ).to_pylist()
    )
    path = world.home / "blobs" / ref[:2] / ref[2:4] / ref
    path.write_bytes(b"not the archive")
    report = world.rejudge(judge_spec=LENIENT)
    by_episode = {i.episode_id: i for i in report.items}  # type: ignore[attr-defined]
    assert by_episode[world.idle].outcome == "error" and "unreadable" in by_episode[world.idle].reason
    assert [by_episode[e].outcome for e in world.fixed] == ["judged", "judged"]


def test_a_final_state_not_archived_is_rebuilt_by_re_execution_only_when_it_reproduces(
    world: World, kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    rec = EpisodeRecorder.open(
        bootstrap=kafka.bootstrap, home=tmp_path / "w2", worker_id="w2", topic=topic, delivery="inline"
    )
    try:
        # the fix, made by tool calls and recorded without an archive
        with rec.episode(task=world.task.ref, policy={"id": "old-worker"}) as fixed:
            patch = world.task.reference_bytes().decode()
            cmd = f"git apply - <<'EOF'\n{patch}EOF"
            fixed.tool_result(fixed.tool_call("bash", {"command": cmd}), exit_code=0)
            fixed.reward(judge_name="composite", judge_version="v0", score=0.0, verdict="fail")
        # an output altered on purpose: what the call prints now is not what the log says it printed
        with rec.episode(task=world.task.ref, policy={"id": "old-worker"}) as forged:
            forged.tool_result(forged.tool_call("bash", {"command": "echo hi"}), exit_code=0, stdout="bye\n")
            forged.reward(judge_name="composite", judge_version="v0", score=0.0, verdict="fail")
        rec.flush()
    finally:
        rec.close()
    world.fold()
    report = world.rejudge(selection=RejudgeSelection(episode_ids=(fixed.episode_id, forged.episode_id)))
    by_episode = {i.episode_id: i for i in report.items}  # type: ignore[attr-defined]
    ok = by_episode[fixed.episode_id]
    assert (ok.outcome, ok.verdict) == ("judged", "pass"), ok  # the full judge: the fix is really there
    assert ok.reason == "final state rebuilt by executing its 1 tool calls again"
    bad = by_episode[forged.episode_id]
    assert bad.outcome == "error" and "diverged at step" in bad.reason
