"""Against a real broker: concurrency, ordering, and no loss across crashes and outages."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import jsonschema
import pytest
from kafka import KafkaProducer

from ingest import EpisodeRecorder, KafkaSinkConfig
from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_events, read_log
from schemas import event_json_schemas, new_id, parse_event

pytestmark = pytest.mark.kafka

WORKER = Path(__file__).with_name("recording_worker.py")


def log_events(bootstrap: str, topic: str) -> dict[str, list]:  # type: ignore[type-arg]
    """Events in the log by episode, in log order."""
    out: dict[str, list] = defaultdict(list)  # type: ignore[type-arg]
    for r in read_events(bootstrap, topic):
        assert r.event is not None, r.error
        out[r.event.episode_id].append(r.event)
    return out


def spawn(
    kafka_bootstrap: str,
    home: Path,
    worker: str,
    topic: str,
    episodes: int,
    events: int,
    ledger: Path,
    pause: float = 0.0,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            kafka_bootstrap,
            str(home),
            worker,
            topic,
            str(episodes),
            str(events),
            str(ledger),
            str(pause),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_recorders_deliver_every_event_in_seq_order(
    kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    workers = 4
    procs = [
        spawn(kafka.bootstrap, tmp_path, f"w{i}", topic, 25, 100, tmp_path / f"ledger{i}")
        for i in range(workers)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    by_episode = log_events(kafka.bootstrap, topic)
    assert len(by_episode) == workers * 25
    total = sum(len(v) for v in by_episode.values())
    assert total == 10_000
    for evs in by_episode.values():
        assert [e.seq for e in evs] == list(range(100))  # complete and in seq order in the log
        assert evs[0].type == "episode_started" and evs[-1].type == "episode_ended"
    assert len({e.event_id for evs in by_episode.values() for e in evs}) == 10_000


def _ledger(path: Path) -> list[tuple[str, int]]:
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:  # a torn last line means the record call had not returned
            out.append((parts[0], int(parts[1])))
    return out


def test_worker_killed_with_sigkill_loses_no_recorded_event(
    kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    rng = random.Random(11)
    for _round in range(3):
        p = spawn(kafka.bootstrap, tmp_path, "crashy", topic, 1000, 50, ledger, pause=0.0005)
        assert p.stdout is not None
        p.stdout.readline()  # started
        time.sleep(rng.uniform(0.5, 2.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
    spool = tmp_path / "spool" / "crashy"
    assert list(spool.glob("seg-*.log")), "the kill should leave unacknowledged records behind"
    # Restart the worker: it re-sends its spool first, then records a little more.
    p = spawn(kafka.bootstrap, tmp_path, "crashy", topic, 2, 10, ledger)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert int(out.split()[1]) > 0  # it recovered records
    recorded = set(_ledger(ledger))
    logged = {(e.episode_id, e.seq) for evs in log_events(kafka.bootstrap, topic).values() for e in evs}
    missing = recorded - logged
    assert not missing, f"{len(missing)} recorded events missing, e.g. {sorted(missing)[:3]}"
    assert len(recorded) > 500
    assert list(spool.glob("seg-*.log")) == []


def test_broker_stopped_while_recording_loses_nothing(fresh_broker: EmbeddedKafka, tmp_path: Path) -> None:
    broker = fresh_broker
    broker.topics = {"trajlake.episodes": 8}
    broker.start()
    cfg = KafkaSinkConfig(
        bootstrap_servers=broker.bootstrap,
        delivery_timeout_ms=8000,
        request_timeout_ms=3000,
        max_block_ms=2000,
    )
    rec = EpisodeRecorder.open(bootstrap=broker.bootstrap, home=tmp_path, worker_id="w", sink_config=cfg)
    recorded: list[tuple[str, int]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def record() -> None:
        try:
            while not stop.is_set():
                with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
                    recorded.append((ep.episode_id, 0))
                    for _ in range(20):
                        ep.model_call(completion="y" * 300)
                        recorded.append((ep.episode_id, ep.seq - 1))
                        time.sleep(0.002)
                    ep.end("success")
                    recorded.append((ep.episode_id, ep.seq - 1))
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    th = threading.Thread(target=record)
    th.start()
    time.sleep(1.5)
    broker.stop()
    n_at_stop = len(recorded)
    time.sleep(12)  # longer than the delivery timeout: in-flight batches fail and are spooled
    assert not rec.delivery.healthy
    n_during = len(recorded) - n_at_stop
    broker.start()
    time.sleep(1.5)
    stop.set()
    th.join(60)
    assert not errors, errors
    rec.flush(timeout=120)
    assert rec.delivery.stats.degraded_periods >= 1
    rec.close()
    assert n_during > 100, "recording must go on while the broker is down"
    logged = {
        (e.episode_id, e.seq)
        for evs in log_events(broker.bootstrap, "trajlake.episodes").values()
        for e in evs
    }
    missing = set(recorded) - logged
    assert not missing, f"{len(missing)} of {len(recorded)} recorded events missing"


def test_envelope_from_any_kafka_client_is_a_valid_event(kafka: EmbeddedKafka, topic: str) -> None:
    # What a kcat user would produce by hand, following the exported schema.
    doc = {
        "event_id": new_id(),
        "episode_id": "hand-made-1",
        "seq": 0,
        "type": "episode_started",
        "ts": "2026-11-29T10:00:00Z",
        "schema_version": 1,
        "producer": {"worker_id": "kcat", "host": "laptop", "sdk_version": "none"},
        "payload": {"task": {"id": "t"}, "policy": {"id": "human"}},
    }
    jsonschema.validate(doc, event_json_schemas()["envelope"])
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    p.send(topic, key=b"hand-made-1", value=json.dumps(doc).encode()).get(30)
    p.close()
    [(_, _, _, key, value)] = list(read_log(kafka.bootstrap, topic))
    event = parse_event(value)
    assert key == b"hand-made-1"
    assert event.type == "episode_started" and event.payload.policy.id == "human"  # type: ignore[union-attr]
