"""Against a real broker: concurrency, ordering, and no loss across crashes and outages."""

from __future__ import annotations

import contextlib
import json
import os
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
from tests.waiting import wait_until

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
    delivery: str = "shipper",
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
            delivery,
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _ledger(path: Path) -> list[tuple[str, int]]:
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:  # a torn last line means the record call had not returned
            out.append((parts[0], int(parts[1])))
    return out


@pytest.mark.parametrize("delivery", ["inline", "shipper"])
def test_worker_killed_with_sigkill_loses_no_recorded_event(
    kafka: EmbeddedKafka, topic: str, tmp_path: Path, delivery: str
) -> None:
    """SIGKILL at random points, three times; with the shipper, it is killed too."""
    from ingest.shipper import Progress

    ledger = tmp_path / "ledger"
    spool = tmp_path / "spool" / "crashy"
    rng = random.Random(11)
    left_behind = 0
    for _round in range(3):
        p = spawn(
            kafka.bootstrap, tmp_path, "crashy", topic, 1000, 50, ledger, pause=0.0005, delivery=delivery
        )
        assert p.stdout is not None
        p.stdout.readline()  # started
        # the kill lands at a random point after recording is under way (and, with a shipper,
        # after the shipper has reported): under load either can take seconds to happen
        recorded_before = len(_ledger(ledger)) if ledger.exists() else 0
        wait_until(lambda n=recorded_before: ledger.exists() and len(_ledger(ledger)) > n + 20,
                   what="the worker recording")  # fmt: skip
        if delivery == "shipper":
            wait_until(lambda: Progress.read(spool) is not None, what="the shipper's first progress report")
        time.sleep(rng.uniform(0.0, 1.5))
        p.send_signal(signal.SIGKILL)
        p.wait()
        if delivery == "shipper":
            progress = Progress.read(spool)
            assert progress is not None and progress.pid > 0
            with contextlib.suppress(ProcessLookupError):
                os.kill(progress.pid, signal.SIGKILL)
            shipper_pid = progress.pid
            wait_until(lambda pid=shipper_pid: not _pid_alive(pid), what="the shipper's death")
        left_behind += len(list(spool.glob("seg-*.log")))
    assert left_behind, "the kills should leave unacknowledged records behind"
    # Restart the worker: what is left in the spool is sent first, then it records a little more.
    p = spawn(kafka.bootstrap, tmp_path, "crashy", topic, 2, 10, ledger, delivery=delivery)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    recorded = set(_ledger(ledger))
    logged = {(e.episode_id, e.seq) for evs in log_events(kafka.bootstrap, topic).values() for e in evs}
    missing = recorded - logged
    assert not missing, f"{len(missing)} recorded events missing, e.g. {sorted(missing)[:3]}"
    assert len(recorded) > 500
    # with a shipper, it deletes the last segments as it exits
    wait_until(lambda: list(spool.glob("seg-*.log")) == [], what="an empty spool")


@pytest.mark.parametrize("delivery", ["inline", "shipper", "inline-confluent"])
def test_broker_stopped_while_recording_loses_nothing(
    fresh_broker: EmbeddedKafka, tmp_path: Path, delivery: str
) -> None:
    broker = fresh_broker
    broker.topics = {"trajlake.episodes": 8}
    broker.start()
    delivery, _, client = delivery.partition("-")  # (-confluent: librdkafka, ingest.confluent_sink)
    cfg = KafkaSinkConfig(
        client=client or "kafka-python",
        bootstrap_servers=broker.bootstrap,
        delivery_timeout_ms=8000,
        request_timeout_ms=3000,
        max_block_ms=2000,
    )
    rec = EpisodeRecorder.open(
        bootstrap=broker.bootstrap, home=tmp_path, worker_id="w", sink_config=cfg, delivery=delivery
    )  # type: ignore[arg-type]
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
    wait_until(lambda: len(recorded) > 200, what="recording under way")
    broker.stop()
    n_at_stop = len(recorded)
    time.sleep(12)  # longer than the delivery timeout: in-flight batches fail and are spooled
    if delivery == "inline":
        wait_until(lambda: not rec.delivery.healthy, what="the inline delivery noticing the outage")
    n_during = len(recorded) - n_at_stop
    broker.start()
    time.sleep(1.5)
    stop.set()
    th.join(60)
    assert not errors, errors
    rec.flush(timeout=120)
    if delivery == "inline":
        assert rec.delivery.stats.degraded_periods >= 1
    else:
        assert rec.delivery.stats.sink_resets >= 1  # the shipper rewound at least once
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


def test_shipper_finishes_a_dead_workers_spool_on_its_own(
    kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    from ingest.shipper import Progress, shipper_alive

    ledger = tmp_path / "ledger"
    spool = tmp_path / "spool" / "gone"
    p = spawn(kafka.bootstrap, tmp_path, "gone", topic, 1000, 50, ledger, pause=0.0005)
    assert p.stdout is not None
    p.stdout.readline()
    wait_until(lambda: ledger.exists() and len(_ledger(ledger)) > 100, what="the worker recording")
    p.send_signal(signal.SIGKILL)  # the worker dies and never comes back
    p.wait()
    wait_until(lambda: not shipper_alive(spool) and not list(spool.glob("seg-*.log")),
               what="the shipper shipping the spool and exiting")  # fmt: skip
    assert list(spool.glob("seg-*.log")) == []
    recorded = set(_ledger(ledger))
    logged = {(e.episode_id, e.seq) for evs in log_events(kafka.bootstrap, topic).values() for e in evs}
    assert recorded and not (recorded - logged)
    progress = Progress.read(spool)
    assert progress is not None and progress.acknowledged >= len(recorded)


def test_a_busy_healthy_spool_reports_no_damage(kafka: EmbeddedKafka, topic: str, tmp_path: Path) -> None:
    """Many rotations under the default shipper: every record arrives and nothing is called damaged.

    The shipper reads a live segment as it grows, its seal included; once the next segment exists
    it reads the old one as final from where it stopped. A scan that starts after the seal cannot
    see it, and used to call every rotated segment truncated (a 0-byte quarantine entry each), so
    ``trajlake spool status`` failed on every busy worker.
    """
    from ingest.spool import quarantined

    rec = EpisodeRecorder.open(
        bootstrap=kafka.bootstrap, home=tmp_path, worker_id="busy", topic=topic, spool_max_bytes=1 << 20
    )  # segments of 256 KiB: a rotation every ~400 events
    ids = []
    for e in range(20):
        with rec.episode(task={"id": f"t{e}"}, policy={"id": "p"}) as ep:
            ids += [ep.model_call(completion="x" * 600, latency_s=0.01) for _ in range(100)]
            ep.end("success")
    rec.flush(timeout=120)
    rec.close()
    in_log = {e.event_id for evs in log_events(kafka.bootstrap, topic).values() for e in evs}
    assert set(ids) <= in_log and len(in_log) == 20 * 102
    spool = tmp_path / "spool" / "busy"
    assert quarantined(spool) == []
    cli = Path(sys.executable).with_name("trajlake")
    p = subprocess.run([str(cli), "spool", "status"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TRAJLAKE_HOME": str(tmp_path)})  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
