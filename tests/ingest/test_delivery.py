"""Spooled delivery logic against the in-memory sink: outages, failures, recovery."""

from __future__ import annotations

import time
from pathlib import Path

from ingest import MemorySink, Spool, SpooledDelivery
from tests.waiting import GENEROUS_S, wait_until


def wait_for(cond, timeout: float = GENEROUS_S) -> None:  # type: ignore[no-untyped-def]
    wait_until(cond, timeout=timeout)


def values(sink: MemorySink) -> list[bytes]:
    return [v for _, _, v in sink.records]


def test_healthy_delivery_empties_the_spool(tmp_path: Path) -> None:
    sink = MemorySink()
    d = SpooledDelivery(Spool(tmp_path), sink)
    for i in range(1000):
        d.submit("t", b"k", b"%d" % i)
    d.flush(5)
    assert values(sink) == [b"%d" % i for i in range(1000)]
    assert d.pending == 0 and d.stats.acknowledged == 1000
    d.close()
    assert list(tmp_path.glob("seg-*")) == []


def test_outage_spools_then_redelivers_in_order(tmp_path: Path) -> None:
    sink = MemorySink()
    d = SpooledDelivery(Spool(tmp_path), sink, retry_interval_s=0.05)
    for i in range(10):
        d.submit("t", b"k", b"%d" % i)
    sink.down = True
    for i in range(10, 50):
        d.submit("t", b"k", b"%d" % i)
    assert not d.healthy
    wait_for(lambda: d.pending == 40)  # the first ten are acknowledged once reaped
    time.sleep(0.2)
    assert len(sink.records) == 10
    sink.down = False
    d.flush(10)
    assert values(sink) == [b"%d" % i for i in range(50)]
    assert d.healthy and d.stats.degraded_periods == 1
    d.close()


def test_failed_inflight_records_are_resent_before_newer_ones(tmp_path: Path) -> None:
    sink = MemorySink(auto_ack=False)
    d = SpooledDelivery(Spool(tmp_path), sink, retry_interval_s=0.05)
    for i in range(5):
        d.submit("t", b"k", b"%d" % i)
    sink.down = True  # an outage: Kafka's delivery timeout expires for what it held
    sink.fail_inflight()
    wait_for(lambda: not d.healthy)
    for i in range(5, 8):
        d.submit("t", b"k", b"%d" % i)  # go to the backlog behind the failed ones
    sink.auto_ack = True
    sink.down = False
    d.flush(10)
    assert values(sink) == [b"%d" % i for i in range(8)]
    assert d.stats.failed == 5 and d.stats.redelivered == 8
    d.close()


def test_unacknowledged_records_of_a_dead_process_are_resent(tmp_path: Path) -> None:
    sink = MemorySink(auto_ack=False)
    d = SpooledDelivery(Spool(tmp_path), sink)
    for i in range(20):
        d.submit("t", b"k", b"%d" % i)
    sink.deliver()
    d.flush(5)
    for i in range(20, 30):
        d.submit("t", b"k", b"%d" % i)
    # The process "dies": nothing acknowledges the last ten; release the spool
    # the way the kernel would (the flock goes with the process).
    d._closed = True
    d.spool.close()
    sink2 = MemorySink()
    d2 = SpooledDelivery(Spool(tmp_path), sink2)
    assert d2.stats.recovered >= 10
    d2.flush(10)
    got = values(sink2)
    assert [b"%d" % i for i in range(20, 30)] == got[-10:]
    d2.close()
    assert list(tmp_path.glob("seg-*")) == []


def test_flush_timeout_keeps_the_records(tmp_path: Path) -> None:
    import pytest

    from ingest import DeliveryTimeoutError

    sink = MemorySink(auto_ack=False)
    d = SpooledDelivery(Spool(tmp_path), sink)
    d.submit("t", b"k", b"v")
    with pytest.raises(DeliveryTimeoutError, match="stay in the spool"):
        d.flush(0.2)
    assert d.pending == 1
    sink.deliver()
    d.flush(5)
    assert d.pending == 0
    d.close()


def test_a_stalled_sink_is_reset_and_everything_resent(tmp_path: Path) -> None:
    sink = MemorySink(auto_ack=False)
    d = SpooledDelivery(Spool(tmp_path), sink, stall_timeout_s=0.3, retry_interval_s=0.05)
    for i in range(6):
        d.submit("t", b"k", b"%d" % i)
    # The sink never answers (a wedged client): after the stall timeout the
    # records are abandoned, the sink reset, and all of them re-sent in order.
    sink.auto_ack = True
    wait_for(lambda: d.stats.sink_resets == 1)
    d.flush(10)
    assert values(sink) == [b"%d" % i for i in range(6)]
    assert d.stats.extra_abandoned == 6 and d.pending == 0
    d.close()
