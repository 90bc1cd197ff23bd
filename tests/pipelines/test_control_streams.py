"""Checkpoints and task admissions are control streams: their tables are projections of the log."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from fold.rows import FOLD_ERROR, assemble, dead_letter
from ingest.kafka_broker import EmbeddedKafka
from ingest.publish import publish_events
from lake import Lake, consistent_versions, diff_lakes
from learners.checkpoints import CheckpointInfo, Lineage, lineage_chain, publish_checkpoint
from pipelines import PipelineConfig, replay, run_once
from pipelines.beam_stages import check_stream_topic
from schemas.codec import parse_event, serialize_event
from schemas.control import CHECKPOINT, TASK, control_event, control_row, stream_kind
from schemas.errors import SchemaError
from tests.pipelines.factories import T0, ended, started, wire
from tests.pipelines.log_workload import produce

TOPICS = {"checkpoint": "learner", "task": "tasks"}


def task_row(task_id: str, *, admitted: bool = True, version: str = "1", **kw: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "version": version,
        "family": "pyfix",
        "tier": "easy",
        "spec": json.dumps({"id": task_id}),
        "spec_digest": "d" * 64,
        "state_digest": "s" * 64,
        "admitted": admitted,
        "reasons": [] if admitted else ["passes_reference: the judge gives fail on the reference"],
        "admitted_at": dt.datetime.now(dt.UTC),
        "do_nothing_score": 0.0,
        "null_effort_max": 0.0,
        "split": "train",
        **kw,
    }


def checkpoint(name: str, parent: str | None, lake: str) -> CheckpointInfo:
    return CheckpointInfo(
        checkpoint_id=name,
        policy_id="pol",
        backend="torch",
        path=f"/ck/{name}",
        created_at=(T0 + dt.timedelta(minutes=len(name))).isoformat(),
        config={"d_model": 8},
        lineage=Lineage(
            lake_uri=lake,
            table_versions={"episodes": 3},
            judge_name="tests",
            judge_version="v1",
            num_samples=12,
            parent_id=parent,
            metrics={"loss": 0.5},
        ),
    )


# ---------------------------------------------------------------- the stream's row, without a broker


def test_a_control_event_round_trips_to_exactly_its_row() -> None:
    row = task_row("pyfix-001")
    stream, back = control_row(parse_event(serialize_event(control_event(TASK, row, "admission"))))
    assert stream is TASK and back == row
    info = checkpoint("ck-1", None, "/lake")
    event = control_event(CHECKPOINT, info.row(), "learner")
    assert event.episode_id == "checkpoint:ck-1" and control_row(event)[1] == info.row()
    assert stream_kind("task:pyfix-001@1") is TASK and stream_kind("ep-1") is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(episode_id="task:other@1"), "holds the row of 'task:pyfix-001@1'"),
        (lambda d: d["payload"]["value"].update(admitted="yes"), "admitted must be true or false"),
        (lambda d: d["payload"]["value"].update(bogus=1), "has no column 'bogus'"),
        (lambda d: d["payload"]["value"].pop("spec_digest"), "spec_digest: required"),
        (lambda d: d["payload"]["value"].update(admitted_at="2026-11-01T12:00:00"), "must carry a time zone"),
        (lambda d: d["payload"].update(key="note"), "takes annotations with key 'task_admission'"),
        (lambda d: d["payload"].update(author="agent"), "by 'admission', not 'task_admission' by 'agent'"),
        (lambda d: d["payload"].update(value=[1, 2]), "the value must be a row of tasks"),
        (lambda d: d["payload"]["value"].update(split="test"), "split: must be train or eval"),
    ],
    ids=[
        "wrong-stream",
        "bad-type",
        "unknown-column",
        "missing-column",
        "naive-time",
        "key",
        "author",
        "list",
        "split",
    ],
)
def test_a_control_event_that_is_not_its_row_is_refused(change: Any, problem: str) -> None:
    doc = json.loads(serialize_event(control_event(TASK, task_row("pyfix-001"), "admission")))
    change(doc)
    with pytest.raises(SchemaError) as err:
        control_row(parse_event(json.dumps(doc).encode()))
    assert problem in str(err.value)


def test_control_streams_live_only_on_their_topics_and_nothing_else_does() -> None:
    task = control_event(TASK, task_row("pyfix-001"), "admission")
    check_stream_topic(task, "tasks", TOPICS)
    with pytest.raises(SchemaError, match="belongs on topic tasks, not trajlake.episodes"):
        check_stream_topic(task, "trajlake.episodes", TOPICS)  # a rollout worker cannot admit a task
    episode = parse_event(wire(started("ep-1")))
    check_stream_topic(episode, "trajlake.episodes", TOPICS)
    with pytest.raises(SchemaError, match="topic learner carries only checkpoint control streams"):
        check_stream_topic(episode, "learner", TOPICS)


def test_the_fold_takes_a_streams_latest_event_and_dead_letters_what_it_cannot_fold() -> None:
    first = control_event(TASK, task_row("pyfix-001", admitted=False), "admission")
    again = control_event(TASK, task_row("pyfix-001"), "admission")
    rows = [
        {**json.loads(serialize_event(e)), "topic": "tasks", "partition": 0, "offset": i}
        for i, e in enumerate((again, first))
    ]
    from fold.rows import event_row

    # the latest in the log wins (whatever the producers' clocks say); a checkpoint's first event stands
    stored = [event_row(e, "tasks", 0, i) for i, e in enumerate((first, again))]
    assert assemble(first.episode_id, stored[::-1]) == {"tasks": [control_row(again)[1]]}
    ck1 = control_event(CHECKPOINT, checkpoint("ck-9", None, "/l").row(), "learner")
    ck2 = control_event(CHECKPOINT, {**checkpoint("ck-9", None, "/l").row(), "path": "/elsewhere"}, "learner")
    ck_rows = [event_row(e, "learner", 0, 7 + i) for i, e in enumerate((ck1, ck2))]
    assert assemble(ck1.episode_id, ck_rows)["checkpoints"][0]["path"] == "/ck/ck-9"
    letter = dead_letter("ep-9", rows, ValueError("boom"))
    assert (
        letter["error"] == f"{FOLD_ERROR}ep-9: ValueError: boom" and letter["offset"] == 0
    )  # the first event
    assert json.loads(letter["raw"])["event_ids"] == sorted([first.event_id, again.event_id])


# ---------------------------------------------------------------- on a real broker and real tables


@pytest.fixture
def control_topics(kafka: EmbeddedKafka) -> dict[str, str]:
    base = f"t.control.{os.getpid()}.{random.getrandbits(24):06x}"
    names = {"episodes": f"{base}.episodes", "checkpoint": f"{base}.learner", "task": f"{base}.tasks"}
    EmbeddedKafka(
        kafka.home, kafka.bootstrap, topics={n: (4 if k == "episodes" else 1) for k, n in names.items()}
    ).ensure_topics()
    return names


@pytest.mark.kafka
def test_tasks_and_checkpoints_are_folded_from_the_log_and_replay_rebuilds_them(
    kafka: EmbeddedKafka, control_topics: dict[str, str], tmp_path: Path
) -> None:
    lake_dir = str(tmp_path / "lake")
    cfg = PipelineConfig(
        bootstrap=kafka.bootstrap,
        lake_root=lake_dir,
        topics=tuple(control_topics.values()),
        control_topics={"checkpoint": control_topics["checkpoint"], "task": control_topics["task"]},
        running_mode="in_memory",
    )
    episodes = control_topics["episodes"]
    # admission, checkpoints, episodes, and an attempt to forge each kind on the wrong topic
    publish_events(kafka.bootstrap, control_topics["task"], [
        control_event(TASK, task_row("pyfix-001", admitted=False), "admission"),
        control_event(TASK, task_row("pyfix-002"), "admission"),
    ])  # fmt: skip
    parent, child = checkpoint("ck-a", None, lake_dir), checkpoint("ck-b", "ck-a", lake_dir)
    for info in (parent, child):
        publish_checkpoint(kafka.bootstrap, control_topics["checkpoint"], info)
    forged = control_event(TASK, task_row("pyfix-999"), "admission")
    stray = started("ep-stray")
    produce(kafka.bootstrap, [
        (episodes, b"ep-1", wire(started("ep-1"))), (episodes, b"ep-1", wire(ended("ep-1", 1))),
        (episodes, forged.episode_id.encode(), serialize_event(forged)),
        (control_topics["task"], b"ep-stray", wire(stray)),
    ])  # fmt: skip
    run_once(cfg)
    lake = Lake(lake_dir)
    tasks = {r["task_id"]: r for r in lake.read("tasks").to_pylist()}
    assert set(tasks) == {"pyfix-001", "pyfix-002"} and tasks["pyfix-001"]["admitted"] is False
    assert [c["checkpoint_id"] for c in lineage_chain(lake_dir, "ck-b")] == ["ck-b", "ck-a"]
    assert {r["episode_id"] for r in lake.read("episodes").to_pylist()} == {"ep-1"}  # no control stream
    errors = sorted(r["error"] for r in lake.read("quarantine").to_pylist())
    assert len(errors) == 2
    assert "belongs on topic" in errors[0] and "carries only task control streams" in errors[1]

    # a re-admission is a new event in the same stream: the latest wins, in place
    publish_events(
        kafka.bootstrap, control_topics["task"], [control_event(TASK, task_row("pyfix-001"), "admission")]
    )
    run_once(cfg)
    tasks = {r["task_id"]: r for r in lake.read("tasks").to_pylist()}
    assert len(tasks) == 2 and tasks["pyfix-001"]["admitted"] is True

    # every table, these two included, is rebuilt row for row from the log
    replayed = Lake(tmp_path / "replayed")
    replay(dataclasses.replace(cfg, lake_root=replayed.root))
    diffs = {d.table: d for d in diff_lakes(lake, replayed)}
    assert {"tasks", "checkpoints"} <= set(diffs) and all(d.equal for d in diffs.values()), diffs
    assert diffs["tasks"].rows_b == 2 and diffs["checkpoints"].rows_b == 2

    # the tables committed the same offsets, so their latest versions are one consistent snapshot
    names = ("episodes", "tasks", "checkpoints")
    assert consistent_versions(lake, names) == {n: lake.table(n).version() for n in names}


def test_consistent_versions_step_back_over_a_batch_only_partly_committed(tmp_path: Path) -> None:
    import pyarrow as pa

    from schemas.tables import TABLES

    lake = Lake(tmp_path / "lake")
    lake.ensure(["episodes", "rewards"])
    empty = {n: pa.Table.from_pylist([], TABLES[n]) for n in ("episodes", "rewards")}
    for offset in (9, 19):  # two whole batches
        for n in ("episodes", "rewards"):
            lake.write(n, empty[n], mode="upsert", txns={"p:t:0": offset})
    whole = consistent_versions(lake, ["episodes", "rewards"])
    assert whole == {"episodes": 2, "rewards": 2}
    # a third batch has committed episodes and not yet rewards
    lake.write("episodes", empty["episodes"], mode="upsert", txns={"p:t:0": 29})
    assert consistent_versions(lake, ["episodes", "rewards"]) == {"episodes": 2, "rewards": 2}


def test_values_the_table_cannot_hold_are_refused_before_any_commit() -> None:
    base = json.loads(
        serialize_event(control_event(CHECKPOINT, checkpoint("ck-x", None, "/l").row(), "learner"))
    )

    def refused(**value: Any) -> str:
        doc = json.loads(json.dumps(base))
        doc["payload"]["value"].update(value)
        with pytest.raises(SchemaError) as err:
            control_row(parse_event(json.dumps(doc).encode()))
        return str(err.value)

    assert "must fit in int64" in refused(num_samples=2**63)  # would stop every batch at staging
    assert "out of the range of dates" in refused(created_at="0001-01-01T00:00:00+01:00")
    with pytest.raises(SchemaError, match="must not contain '@'"):
        control_event(
            TASK, task_row("a@b", version="c"), "admission"
        )  # would share task:a@b@c with ("a", "b@c")
