"""No acknowledged event is lost, against a real broker: records of any size, damaged spools, orphaned
shippers, a full disk, and an unreachable broker with inline delivery.

Every test keeps a ledger of what ``record()`` acknowledged and checks the log against it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ingest import EpisodeRecorder, KafkaSinkConfig, SpoolDiskFullError
from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_events, read_log
from ingest.shipper import Progress, shipper_alive
from ingest.spool import MAX_VALUE_BYTES, Spool, quarantined
from schemas import new_id
from tests.conftest import free_port
from tests.tmpfs import small_tmpfs
from tests.waiting import wait_until

pytestmark = pytest.mark.kafka

TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))


def logged_ids(bootstrap: str, topic: str) -> Counter[str]:
    """How many times each event id is in the topic."""
    out: Counter[str] = Counter()
    for r in read_events(bootstrap, topic):
        assert r.event is not None, r.error
        out[r.event.event_id] += 1
    return out


# the envelope around an annotation's text: well under a kilobyte
SIZES = {
    "1 B": 1,
    "255 KiB": 255 << 10,
    "257 KiB": 257 << 10,
    "1 MiB": 1 << 20,
    "the limit": MAX_VALUE_BYTES - 1024,
}


@pytest.mark.parametrize("delivery", ["shipper", "inline"])
def test_records_of_every_size_reach_kafka_and_no_segment_goes_unacknowledged(
    fresh_broker: EmbeddedKafka, tmp_path: Path, delivery: str
) -> None:
    broker = fresh_broker
    broker.topics = {"trajlake.episodes": 4}
    ledger: list[str] = []
    # the broker is down while recording: everything waits in the spool, nothing may be deleted
    rec = EpisodeRecorder.open(
        bootstrap=broker.bootstrap, home=tmp_path, worker_id="big", delivery=delivery,  # type: ignore[arg-type]
        sink_config=KafkaSinkConfig(bootstrap_servers=broker.bootstrap, max_block_ms=2000,
                                    delivery_timeout_ms=8000, request_timeout_ms=3000),
    )  # fmt: skip
    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        for name, n in SIZES.items():
            ledger.append(ep.annotate(name, "x" * n))
            ledger.append(ep.annotate("small after " + name, 1))
    spool = tmp_path / "spool" / "big"
    assert sum(p.stat().st_size for p in spool.glob("seg-*.log")) > sum(SIZES.values())
    broker.start()
    rec.flush(timeout=240)
    rec.close()
    got = logged_ids(broker.bootstrap, "trajlake.episodes")
    assert set(ledger) <= set(got), f"{len(set(ledger) - set(got))} acknowledged events missing"
    sizes = [len(v) for *_, v in read_log(broker.bootstrap, "trajlake.episodes")]
    assert max(sizes) > MAX_VALUE_BYTES - 2048  # the largest one went through whole
    wait_until(lambda: not list(spool.glob("seg-*.log")), what="the delivered segments deleted")


def test_fifty_model_calls_of_real_llm_size_reach_the_events_table(
    fresh_broker: EmbeddedKafka, tmp_path: Path
) -> None:
    from lake import Lake
    from pipelines import PipelineConfig, run_once

    broker = fresh_broker
    broker.start()
    # 20k token ids and log-probs: ~400 KB of JSON, what real model calls weigh
    rng = random.Random(3)
    ids = [rng.randrange(150_000) for _ in range(20_000)]
    lps = [-rng.random() * 8 for _ in range(20_000)]
    ledger = []
    with EpisodeRecorder.open(bootstrap=broker.bootstrap, home=tmp_path, worker_id="llm") as rec:  # default
        for _ in range(2):
            with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
                for _ in range(25):
                    ledger.append(
                        ep.model_call(completion="ok", completion_token_ids=ids, completion_logprobs=lps)
                    )
        rec.flush(timeout=240)
    assert max(len(v) for *_, v in read_log(broker.bootstrap, "trajlake.episodes")) > 350_000
    cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=str(tmp_path / "lake"))
    run_once(cfg)
    events = Lake(cfg.lake_root).read("events").to_pylist()
    assert set(ledger) <= {e["event_id"] for e in events}
    assert sum(e["type"] == "model_call" for e in events) == 50


def test_an_oversized_event_is_refused_at_record_and_consumes_no_seq(tmp_path: Path) -> None:
    from ingest import MemorySink, RecordTooLargeError

    with EpisodeRecorder.open(
        bootstrap="127.0.0.1:1", home=tmp_path, worker_id="w", sink=MemorySink()
    ) as rec:
        with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
            with pytest.raises(RecordTooLargeError, match="over the limit of 16,777,216 bytes"):
                ep.annotate("huge", "x" * (MAX_VALUE_BYTES + 1))
            ep.annotate("fine", 1)
            assert ep.seq == 2  # episode_started, then "fine": the refused one took no seq


def _damaged_spool(
    home: Path, worker: str, n: int, how: str = "flip"
) -> tuple[list[bytes], Path, tuple[int, int]]:
    """A dead worker's spool of ``n`` records in one sealed segment, damaged in the middle."""
    sp = Spool(home / "spool" / worker)
    values = []
    for i in range(n):
        eid = new_id()
        doc = {"event_id": eid, "episode_id": f"ep-{worker}", "seq": i, "type": "annotation",
               "ts": "2026-12-01T10:00:00Z", "schema_version": 1,
               "producer": {"worker_id": worker, "host": "h", "sdk_version": "t"},
               "payload": {"key": "k", "value": i}}  # fmt: skip
        value = json.dumps(doc).encode()
        sp.append("trajlake.episodes", f"ep-{worker}".encode(), value)
        values.append(value)
    seg = sp._active
    assert seg is not None
    sp.close()
    raw = bytearray(seg.path.read_bytes())
    mid = len(raw) // 2
    width = 1 if how == "flip" else 4096
    if how == "flip":
        raw[mid] ^= 0x10
    else:
        raw[mid : mid + width] = bytes(width)
    seg.path.write_bytes(bytes(raw))
    return values, seg.path, (mid, mid + width)


@pytest.mark.parametrize("how", ["flip", "zero-page"])
def test_drain_delivers_every_intact_record_of_a_damaged_spool_and_names_the_damage(
    kafka: EmbeddedKafka, tmp_path: Path, how: str
) -> None:
    home = tmp_path / "home"
    worker = f"gone-{how}"
    values, seg, damage_range = _damaged_spool(home, worker, 300, how)
    env = {**os.environ, "TRAJLAKE_HOME": str(home), "TRAJLAKE_KAFKA_BOOTSTRAP": kafka.bootstrap,
           "COLUMNS": "250"}  # fmt: skip
    p = subprocess.run([TRAJLAKE, "spool", "drain"], env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 1 and "Traceback" not in out, out
    # exactly the records whose frames the damage did not touch
    topic_key = len("trajlake.episodes") + len(f"ep-{worker}")
    starts, pos = [], 0
    for v in values:
        starts.append(pos)
        pos += 16 + topic_key + len(v)
    lo, hi = damage_range
    intact = {v for v, st, nxt in zip(values, starts, [*starts[1:], pos]) if nxt <= lo or st >= hi}
    assert "records delivered, 0 left" in out and "damaged bytes" in out and "of segment 0" in out
    [q] = quarantined(home / "spool" / worker)
    assert q["kind"] == "damaged" and (home / "spool" / worker / "quarantine" / str(q["file"])).exists()
    logged = [v for *_, v in read_log(kafka.bootstrap, "trajlake.episodes") if f'"ep-{worker}"'.encode() in v]
    assert set(logged) == intact and len(logged) == len(intact)
    assert f"{len(intact)} of {len(intact)} records delivered" in out
    assert not seg.exists()  # delivered and deleted: the damage is in the quarantine
    status = subprocess.run(
        [TRAJLAKE, "spool", "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 1 and "damaged" in status.stdout + status.stderr


def _start_shipper(spool: Path, bootstrap: str, orphan_timeout: float) -> subprocess.Popen[bytes]:
    cfg = json.dumps({"bootstrap_servers": bootstrap, "max_block_ms": 1000, "delivery_timeout_ms": 3000,
                      "request_timeout_ms": 1500})  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "ingest.shipper", str(spool), "--config", cfg, "--stall-timeout", "3",
         "--orphan-timeout", str(orphan_timeout)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def test_an_orphaned_shipper_with_an_unreachable_broker_gives_up_and_frees_the_spool(tmp_path: Path) -> None:
    spool = tmp_path / "spool" / "w"
    sp = Spool(spool)
    for i in range(20):
        sp.append("trajlake.episodes", b"k", b"v%d" % i)
    sp.close()  # the worker is gone
    proc = _start_shipper(spool, f"127.0.0.1:{free_port()}", orphan_timeout=3)
    proc.wait(timeout=120)
    progress = Progress.read(spool)
    assert progress is not None and progress.gave_up and "spool drain" in (progress.error or "")
    assert not shipper_alive(spool)
    assert len(Spool(spool).recover()) == 20  # nothing lost: all left for a drain


def test_a_new_worker_replaces_an_orphan_shipping_elsewhere(
    kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool" / "w"
    Spool(spool).close()
    orphan = _start_shipper(spool, f"127.0.0.1:{free_port()}", orphan_timeout=3600)  # an old configuration
    wait_until(lambda: shipper_alive(spool), what="the orphan shipper running")
    try:
        with EpisodeRecorder.open(
            bootstrap=kafka.bootstrap, home=tmp_path, worker_id="w", topic=topic
        ) as rec:
            with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
                ids = [ep.annotate("n", i) for i in range(50)]
            rec.flush(timeout=120)
        assert set(ids) <= set(logged_ids(kafka.bootstrap, topic))
        assert orphan.wait(timeout=60) is not None  # it was told to stop
    finally:
        with contextlib.suppress(ProcessLookupError):
            orphan.kill()


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    with small_tmpfs(tmp_path / "disk", "24m") as where:
        yield where


def test_a_full_disk_stops_recording_loses_nothing_and_duplicates_nothing(
    kafka: EmbeddedKafka, topic: str, small_disk: Path
) -> None:
    ledger: list[str] = []
    rec = EpisodeRecorder.open(bootstrap=kafka.bootstrap, home=small_disk, worker_id="w", topic=topic,
                               spool_max_bytes=8 << 20)  # fmt: skip
    filler = small_disk / "filler"
    refused = 0
    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        ledger.append(ep.annotate("first", 0))  # the spool's first segment is allocated
        with open(filler, "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * (256 << 10))  # fill the disk completely
        for i in range(400):
            try:
                ledger.append(ep.annotate("n", "x" * 20_000 + str(i)))
            except SpoolDiskFullError:
                refused += 1
        assert refused > 0, "the disk should have been full"
        filler.unlink()  # space is back: recording resumes by itself
        for i in range(20):
            ledger.append(ep.annotate("after", i))
    rec.flush(timeout=120)
    rec.close()
    got = logged_ids(kafka.bootstrap, topic)
    assert set(ledger) <= set(got), "an acknowledged event was lost"
    assert max(got.values()) == 1, "events were sent twice (a shipper restarted from stale progress)"
    log_text = (small_disk / "spool" / "w" / "shipper.log").read_text()
    assert "exited" not in log_text and "Traceback" not in log_text


def test_inline_delivery_with_the_broker_down_does_not_wait_on_metadata_per_record(tmp_path: Path) -> None:
    cfg = KafkaSinkConfig(bootstrap_servers=f"127.0.0.1:{free_port()}", max_block_ms=1500)
    rec = EpisodeRecorder.open(bootstrap=cfg.bootstrap_servers, home=tmp_path, worker_id="w",
                               delivery="inline", sink_config=cfg)  # fmt: skip
    sink = rec.delivery.sink  # type: ignore[union-attr]
    for _ in range(5):
        with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
            for i in range(10):
                ep.annotate("n", i)
    # one metadata lookup (and its wait) at most, not one per episode or per record
    assert sink.metadata_lookups <= 1
    assert rec.delivery.pending == 5 * 12  # all of it spooled
    rec.close(timeout=1)


def _dead_spool_of_segments(home: Path, worker: str, n: int) -> tuple[Path, dict[int, list[bytes]]]:
    """A dead worker's spool of ``n`` ~1 KiB records over several small sealed segments."""
    d = home / "spool" / worker
    sp = Spool(d, segment_bytes=64 << 10, max_bytes=64 << 20)
    by_segment: dict[int, list[bytes]] = {}
    for i in range(n):
        doc = {"event_id": new_id(), "episode_id": f"ep-{worker}", "seq": i, "type": "annotation",
               "ts": "2026-12-01T10:00:00Z", "schema_version": 1,
               "producer": {"worker_id": worker, "host": "h", "sdk_version": "t"},
               "payload": {"key": "k", "value": "x" * 1000}}  # fmt: skip
        value = json.dumps(doc).encode()
        seg, _ = sp.append("trajlake.episodes", f"ep-{worker}".encode(), value)
        by_segment.setdefault(seg.number, []).append(value)
    sp.close()
    return d, by_segment


def test_a_vanished_segment_and_a_seal_cut_at_a_frame_boundary_are_named_as_damage(
    kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    from ingest.spool import scan_frames, segment_path

    home = tmp_path / "home"
    worker = "gone-gaps"
    d, by_segment = _dead_spool_of_segments(home, worker, 300)
    assert len(by_segment) >= 4
    segment_path(d, 1).unlink()  # a whole segment gone: no bad byte left to see
    seg2 = segment_path(d, 2)
    frames = scan_frames(seg2.read_bytes(), final=True).frames
    os.truncate(seg2, frames[-3].position)  # the seal and the last three records cut off cleanly
    expected = {v for n, vs in by_segment.items() if n not in (1, 2) for v in vs} | set(by_segment[2][:-3])
    env = {**os.environ, "TRAJLAKE_HOME": str(home), "TRAJLAKE_KAFKA_BOOTSTRAP": kafka.bootstrap,
           "COLUMNS": "250"}  # fmt: skip
    p = subprocess.run([TRAJLAKE, "spool", "drain"], env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 1 and "Traceback" not in out, out
    assert "segment 1 is gone" in out and "segment 2 ends before its seal" in out, out
    kinds = sorted(str(q["kind"]) for q in quarantined(d))
    assert kinds == ["missing", "truncated"]
    logged = [v for *_, v in read_log(kafka.bootstrap, "trajlake.episodes") if f'"ep-{worker}"'.encode() in v]
    assert set(logged) == expected and len(logged) == len(expected)
    # reported once: a second drain has nothing new to say about them
    again = subprocess.run([TRAJLAKE, "spool", "drain"], env=env, capture_output=True, text=True, timeout=300)
    assert "0 found now" in again.stdout, again.stdout + again.stderr


def test_damaged_progress_or_next_files_never_make_new_records_look_shipped(
    kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool" / "w"
    Spool(spool).close()
    # a shipper's progress, then a flipped digit that keeps it valid JSON: it fails its checksum
    Progress(segment=2, offset=100, count=5).write(spool)
    text = (spool / "SHIPPED").read_text()
    (spool / "SHIPPED").write_text(text.replace('"segment": 2', '"segment": 7'))
    assert Progress.read(spool) is None
    # a valid progress far ahead, and NEXT lost: new segments must be numbered after it
    Progress(segment=5, offset=10, count=1).write(spool)
    (spool / "NEXT").unlink(missing_ok=True)
    ledger = []
    rec = EpisodeRecorder.open(bootstrap=kafka.bootstrap, home=tmp_path, worker_id="w", topic=topic)
    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        for i in range(50):
            ledger.append(ep.annotate("n", i))
    rec.flush(timeout=120)
    rec.close()
    got = logged_ids(kafka.bootstrap, topic)
    assert set(ledger) <= set(got), f"{len(set(ledger) - set(got))} acknowledged events lost"
