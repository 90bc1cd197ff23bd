"""Bad records never halt the lake; an event id names one event; a damaged lake says so and how to fix it.

On a real broker and real Delta tables, through the same pipeline runs users make.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer

from ingest.kafka_broker import EmbeddedKafka
from lake import Lake, LakeDamagedError, diff_lakes
from pipelines import PipelineConfig, replay, run_once
from schemas import new_id
from tests.pipelines.factories import T0, ended, ev, model, reward, started, wire

pytestmark = pytest.mark.kafka

TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))
EPISODES = "trajlake.episodes"


@pytest.fixture
def broker(fresh_broker: EmbeddedKafka) -> EmbeddedKafka:
    fresh_broker.start()
    return fresh_broker


def send(bootstrap: str, records: list[tuple[bytes, bytes, int | None]]) -> None:
    """``(key, value, partition)`` records to the episodes topic, in order."""
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for key, value, part in records:
        p.send(EPISODES, key=key, value=value, partition=part).get(30)
    p.close()


def assert_replay_equals(broker: EmbeddedKafka, lake: Lake, into: Path) -> None:
    """Rebuilding the lake from the whole log gives exactly the incremental lake."""
    replay(PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(into)))
    diffs = diff_lakes(lake, Lake(into))
    assert all(d.equal for d in diffs), [d for d in diffs if not d.equal]


def test_poison_records_are_quarantined_and_their_neighbours_land(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    docs = [started("ep1"), model("ep1", 1), model("ep1", 2), model("ep1", 3), ended("ep1", 4)]
    deep = json.dumps(ev("ep1", 9, "annotation", {"key": "k", "value": 0})).replace(
        '"value": 0', '"value": ' + "[" * 10_000 + "]" * 10_000
    )
    huge_seq = dict(ev("ep1", 0, "annotation", {"key": "k"}), seq=2**63)
    huge_exit = ev("ep1", 0, "tool_result", {"call_id": "c", "exit_code": 2**40})
    nan_score = reward("ep1", 5, score=float("nan"))  # json.dumps writes NaN, which Python reads back
    inf_latency = model("ep1", 6, latency_s=float("inf"))
    records = [
        (b"ep1", wire(docs[0]), 0), (b"ep1", deep.encode(), 0), (b"ep1", wire(docs[1]), 0),
        (b"ep1", wire(huge_seq), 0), (b"ep1", wire(docs[2]), 0), (b"ep1", wire(huge_exit), 0),
        (b"ep1", wire(docs[3]), 0), (b"ep1", wire(nan_score), 0), (b"ep1", wire(inf_latency), 0),
        (b"ep1", wire(docs[4]), 0),
    ]  # fmt: skip
    send(broker.bootstrap, records)
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    run_once(cfg)
    lake = Lake(cfg.lake_root)
    assert {r["event_id"] for r in lake.read("events").to_pylist()} == {d["event_id"] for d in docs}
    q = sorted(lake.read("quarantine").to_pylist(), key=lambda r: r["offset"])
    assert [r["offset"] for r in q] == [1, 3, 5, 7, 8]
    assert "nested too deeply" in q[0]["error"]
    assert "seq" in q[1]["error"] and "less than or equal to 9223372036854775807" in q[1]["error"]
    assert "exit_code" in q[2]["error"]
    assert "score" in q[3]["error"] and "latency_s" in q[4]["error"]  # NaN and Infinity are not numbers
    assert lake.read("episodes").to_pylist()[0]["num_events"] == 5
    # later events on the same partition still land: the poison does not block the offsets after it
    send(broker.bootstrap, [(b"ep2", wire(started("ep2")), 0)])
    run_once(cfg)
    assert lake.read("episodes").num_rows == 2


def test_an_event_id_names_one_event_whatever_its_date_and_replay_agrees(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    first = started("ep1")
    same_id_other_day = {**ev("ep1", 0, "episode_started", {"task": {"id": "other"}, "policy": {"id": "p"}},
                              ts=T0 + dt.timedelta(days=3)), "event_id": first["event_id"]}  # fmt: skip
    resend = dict(first)  # an identical copy (a spool re-send): a duplicate, not a conflict
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    send(broker.bootstrap, [(b"ep1", wire(first), 0), (b"ep1", wire(model("ep1", 1)), 0)])
    run_once(cfg)
    send(broker.bootstrap, [(b"ep1", wire(same_id_other_day), 0), (b"ep1", wire(resend), 0)])
    run_once(cfg)
    lake = Lake(cfg.lake_root)
    rows = [r for r in lake.read("events").to_pylist() if r["event_id"] == first["event_id"]]
    assert len(rows) == 1 and rows[0]["event_date"] == T0.date() and rows[0]["offset"] == 0
    [conflict] = lake.read("quarantine").to_pylist()
    assert conflict["offset"] == 2 and conflict["error"].startswith("conflict: ")
    assert "/0/0 " in conflict["error"] and "/0/2 " in conflict["error"]  # both offsets named
    assert {r["task_id"] for r in lake.read("episodes").to_pylist()} == {"t1"}  # steps kept the first
    assert_replay_equals(broker, lake, tmp_path / "replayed")


def test_a_conflict_across_partitions_is_won_by_the_earliest_copy_in_batches_and_in_replay(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    eid = new_id()
    later_partition = {**ev("a", 0, "annotation", {"key": "k", "value": "a"}), "event_id": eid}
    earlier_partition = {**ev("b", 0, "annotation", {"key": "k", "value": "b"}), "event_id": eid}
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    send(broker.bootstrap, [(b"a", wire(later_partition), 5)])
    run_once(cfg)
    send(broker.bootstrap, [(b"b", wire(earlier_partition), 1)])
    run_once(cfg)  # partition 1 sorts before 5: this copy replaces the stored one
    lake = Lake(cfg.lake_root)
    [row] = [r for r in lake.read("events").to_pylist() if r["event_id"] == eid]
    assert row["partition"] == 1 and row["episode_id"] == "b"
    [q] = lake.read("quarantine").to_pylist()
    assert q["partition"] == 5 and q["error"].startswith("conflict: ")
    assert_replay_equals(broker, lake, tmp_path / "replayed")


def test_conflicts_stored_earlier_are_judged_again_when_an_earlier_copy_arrives(
    broker: EmbeddedKafka, tmp_path: Path
) -> None:
    eid = new_id()

    def copy(value: str) -> bytes:
        return wire({**ev("x", 0, "annotation", {"key": "k", "value": value}), "event_id": eid})

    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    send(broker.bootstrap, [(b"x", copy("a"), 3), (b"x", copy("b"), 3)])
    run_once(cfg)  # 3/0 names the event, 3/1 is a conflict against it
    # an earlier partition brings b again (a re-send of 3/1's content) and a third content c
    send(broker.bootstrap, [(b"x", copy("b"), 0), (b"x", copy("c"), 0)])
    run_once(cfg)
    lake = Lake(cfg.lake_root)
    [row] = [r for r in lake.read("events").to_pylist() if r["event_id"] == eid]
    assert (row["partition"], row["offset"]) == (0, 0)
    q = {(r["partition"], r["offset"]): r["error"] for r in lake.read("quarantine").to_pylist()}
    # 3/1 holds what now names the event: a re-send, released; the others name the new winner
    assert sorted(q) == [(0, 1), (3, 0)] and all("/0/0 " in e for e in q.values()), q
    assert_replay_equals(broker, lake, tmp_path / "replayed")


def cli(home: Path, bootstrap: str, *args: str) -> tuple[int, str]:
    env = {**os.environ, "TRAJLAKE_HOME": str(home), "TRAJLAKE_KAFKA_BOOTSTRAP": bootstrap, "COLUMNS": "250"}
    p = subprocess.run([TRAJLAKE, *args], env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert "Traceback" not in out, out
    return p.returncode, out


def test_a_damaged_lake_is_named_with_its_fix_everywhere(broker: EmbeddedKafka, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from api import create_app

    home = tmp_path / "home"
    send(broker.bootstrap, [(b"ep1", wire(d), 0) for d in (started("ep1"), model("ep1", 1), ended("ep1", 2))])
    code, out = cli(home, broker.bootstrap, "pipeline", "run", "--once")
    assert code == 0, out
    code, out = cli(home, broker.bootstrap, "lake", "check")
    assert code == 0 and "intact" in out
    log = home / "lake" / "events" / "_delta_log"
    latest = max(log.glob("*.json"))
    latest.write_text("{garbled")
    send(broker.bootstrap, [(b"ep2", wire(started("ep2")), 0)])
    code, out = cli(home, broker.bootstrap, "pipeline", "run", "--once")
    assert code == 1 and out.count("\n") < 6, out
    assert f"table events of the lake at {home / 'lake'} is damaged at version {int(latest.stem)}" in out
    assert "trajlake replay --into NEW_DIR" in out
    code, out = cli(home, broker.bootstrap, "lake", "check")
    assert code == 1 and "does not parse" in out
    with pytest.raises(LakeDamagedError):
        Lake(home / "lake").read("events")
    client = TestClient(create_app(home / "lake"))
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["damaged"] == ["events"]
    tables = {t["name"]: t for t in client.get("/tables").json()["tables"]}
    assert tables["events"]["problems"] and tables["events"]["rows"] is None
    # a data file gone: reported, not counted
    steps = next((home / "lake" / "steps").rglob("*.parquet"))
    steps.unlink()
    tables = {t["name"]: t for t in client.get("/tables").json()["tables"]}
    assert "data file(s) its log names are gone" in tables["steps"]["problems"][0]
    # the fix: replaying into the damaged lake is refused, into a new one it rebuilds everything
    code, out = cli(home, broker.bootstrap, "replay", "--into", str(home / "lake"))
    assert code == 2 and "already holds tables" in out
    code, out = cli(home, broker.bootstrap, "replay", "--into", str(tmp_path / "rebuilt"))
    assert code == 0, out
    assert Lake(tmp_path / "rebuilt").read("episodes").num_rows == 2
    code, out = cli(home, broker.bootstrap, "lake", "check", "--lake", str(tmp_path / "rebuilt"))
    assert code == 0, out


def test_damaged_data_files_and_an_empty_commit_are_found(broker: EmbeddedKafka, tmp_path: Path) -> None:
    from lake.check import check_lake, refuse_damaged

    home = tmp_path / "home"
    send(broker.bootstrap, [(b"ep1", wire(d), 0) for d in (started("ep1"), model("ep1", 1), ended("ep1", 2))])
    code, out = cli(home, broker.bootstrap, "pipeline", "run", "--once")
    assert code == 0, out
    lake = Lake(home / "lake")
    events = next((home / "lake" / "events").rglob("*.parquet"))
    steps = next((home / "lake" / "steps").rglob("*.parquet"))
    os.truncate(events, events.stat().st_size // 2)  # cut short
    steps.write_bytes(os.urandom(steps.stat().st_size))  # garbage of the right size
    problems = {c.table: c.problems for c in check_lake(lake)}
    assert "not the size its log records" in problems["events"][0]
    assert "not readable Parquet" in problems["steps"][0]
    with pytest.raises(LakeDamagedError, match="events"):
        refuse_damaged(lake)  # the pipeline does not commit on top of a cut file
    code, out = cli(home, broker.bootstrap, "lake", "check")
    assert code == 1 and "not the size" in out and "replay --into" in out
    code, out = cli(home, broker.bootstrap, "lake", "show", "steps")
    assert code == 1 and "table steps of the lake" in out and "is damaged" in out, out
    code, out = cli(home, broker.bootstrap, "pipeline", "run", "--once")
    assert code == 1 and "table events" in out and "damaged" in out, out
    # a zero-byte newest commit (a copy cut short) is damage too
    log = home / "lake" / "episodes" / "_delta_log"
    max(log.glob("*.json")).write_text("")
    assert "is empty" in {c.table: c.problems for c in check_lake(lake)}["episodes"][0]
