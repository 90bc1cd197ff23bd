"""Ingest's Prometheus metrics move with what the spool, the delivery and the shipper really do.

Counters accumulate over a test session and the spool gauges sum over every open spool of the
process, so each test reads a value before and after and asserts on the difference.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from ingest import KafkaSinkConfig, MemorySink, Spool, SpooledDelivery
from ingest.kafka_broker import EmbeddedKafka
from ingest.metrics import ShipperProgressCounts
from ingest.shipper import Progress, ShippedDelivery
from ingest.spool import Damage, quarantine
from tests.waiting import wait_until

PENDING = "trajlake_spool_pending_records"
AGE = "trajlake_spool_oldest_pending_age_seconds"
OLD = 1e6
"""Seconds an append is made to look old by: older than any other spool of the session can be."""


def value(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def test_spool_gauges_follow_appends_acknowledgements_and_recovery(tmp_path: Path) -> None:
    pending, sent = value(PENDING), value("trajlake_recorder_send_seconds_count")
    sp = Spool(tmp_path)
    tickets = [sp.append("t", b"k", b"v%d" % i) for i in range(5)]
    assert value(PENDING) - pending == 5
    seg = tickets[0][0]
    seg.times[0] -= OLD  # the first append was long ago: the oldest unacknowledged record is it
    assert value(AGE) >= OLD
    sp.ack(seg)
    assert value(AGE) < OLD  # the oldest left is the second record, appended just now
    assert value("trajlake_recorder_send_seconds_count") - sent == 1
    assert value(PENDING) - pending == 4
    sp.ack(seg, 2)  # records 1 and 2: one record in SEND_SAMPLE_EVERY (16) is timed, the first is
    assert value("trajlake_recorder_send_seconds_count") - sent == 1
    sp.close()  # two records left for the next owner: no longer this process's
    assert value(PENDING) - pending == 0

    # a process that opens the spool again owns them, and they are at least as old as their file
    [path] = tmp_path.glob("seg-*.log")
    then = time.time() - OLD
    os.utime(path, (then, then))
    again = Spool(tmp_path)
    recovered = again.recover()
    assert len(recovered) == 5 and value(PENDING) - pending == 5  # acknowledgements are per segment
    assert value(AGE) >= OLD - 60
    for r in recovered:
        again.ack(r.segment)
    assert value(PENDING) - pending == 0
    assert value("trajlake_recorder_send_seconds_count") - sent == 1  # no append time known: not timed
    again.close()


def test_damaged_records_are_counted_once_when_quarantined(tmp_path: Path) -> None:
    damaged = value("trajlake_spool_damaged_records_total", {"kind": "damaged"})
    sp = Spool(tmp_path)
    for i in range(5):
        sp.append("topic", b"key", b"value-%d" % i)
    seg = sp._active
    assert seg is not None
    sp.close()
    data = bytearray(seg.path.read_bytes())
    data[-30] ^= 0xFF  # inside the fifth record (the seal frame is the last 28 bytes)
    seg.path.write_bytes(bytes(data))
    again = Spool(tmp_path)
    assert [r.value for r in again.recover()] == [b"value-%d" % i for i in range(4)]
    again.close()
    assert value("trajlake_spool_damaged_records_total", {"kind": "damaged"}) - damaged == 1
    [d] = again.damage_found
    quarantine(tmp_path, seg.number, d, bytes(data[d.start : d.end]), found_by="again")  # kept already
    assert value("trajlake_spool_damaged_records_total", {"kind": "damaged"}) - damaged == 1


def test_records_sent_again_after_a_failure_are_counted_as_retries(tmp_path: Path) -> None:
    retries = value("trajlake_recorder_send_retries_total")
    sink = MemorySink(auto_ack=False)
    d = SpooledDelivery(Spool(tmp_path), sink, retry_interval_s=0.05)
    for i in range(5):
        d.submit("t", b"k", b"%d" % i)
    sink.down = True  # an outage: Kafka's delivery timeout expires for what it held
    sink.fail_inflight()
    wait_until(lambda: not d.healthy, what="delivery degraded")
    sink.auto_ack = True
    sink.down = False
    d.flush(30)
    d.close()
    assert d.stats.redelivered == 5
    assert value("trajlake_recorder_send_retries_total") - retries == 5


def test_shipper_reports_become_counters_once_per_growth_and_per_shipper(tmp_path: Path) -> None:
    names = ("trajlake_shipper_records_total", "trajlake_shipper_errors_total",
             "trajlake_recorder_send_retries_total")  # fmt: skip
    before = [value(n) for n in names]

    def grown() -> list[float]:
        return [value(n) - b for n, b in zip(names, before, strict=True)]

    # an earlier run's shipper left its report: what it counted is not this process's
    counts = ShipperProgressCounts(tmp_path, Progress(pid=10, acknowledged=500, resets=2, resent=9))
    counts.observe(Progress(pid=10, acknowledged=520, resets=2, resent=9))
    assert grown() == [20, 0, 0]
    counts.observe(Progress(pid=10, acknowledged=530, resets=3, resent=12))
    assert grown() == [30, 1, 3]
    # a restarted shipper counts from 0; the damage it kept is read from the quarantine's index
    # (the shipper's own quarantine() counts in the shipper's process: here, in this one too)
    quarantine(tmp_path, 4, Damage(100, 140, "torn", 2), b"x" * 40, found_by="shipper")
    torn = value("trajlake_spool_damaged_records_total", {"kind": "torn"})
    counts.observe(Progress(pid=11, acknowledged=7, torn=1))
    assert grown() == [37, 1, 3]
    assert value("trajlake_spool_damaged_records_total", {"kind": "torn"}) - torn == 2
    counts.observe(Progress(pid=11, acknowledged=7, torn=1))  # the same report again: nothing new
    assert grown() == [37, 1, 3]
    assert value("trajlake_spool_damaged_records_total", {"kind": "torn"}) - torn == 2


@pytest.mark.kafka
def test_a_real_shipper_acknowledges_every_record_and_times_it(
    kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    shipped, sent = value("trajlake_shipper_records_total"), value("trajlake_recorder_send_seconds_count")
    d = ShippedDelivery(Spool(tmp_path / "spool"), KafkaSinkConfig(bootstrap_servers=kafka.bootstrap))
    try:
        for i in range(200):
            d.submit(topic, b"k%d" % (i % 3), b"v%d" % i)
        d.flush(timeout=120)
    finally:
        d.close(timeout=30)
    assert value("trajlake_shipper_records_total") - shipped == 200
    # one record in 16 timed: records 0, 16, ..., 192 of this spool
    assert value("trajlake_recorder_send_seconds_count") - sent == len(range(0, 200, 16))
