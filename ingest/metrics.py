"""Prometheus metrics of ingest (the process's default registry; served by ``--metrics-port``).

- ``trajlake_spool_pending_records``: records appended (or recovered) and not yet acknowledged by
  Kafka, summed over the open spools of this process;
- ``trajlake_spool_oldest_pending_age_seconds``: age of the oldest of them (0 when none), the
  largest over the open spools; both gauges are computed when scraped (:class:`_SpoolCollector`);
- ``trajlake_spool_damaged_records_total{kind}``: records set aside in a spool's quarantine
  (``kind``: ``damaged``, ``torn``, ``truncated``, ``missing``, ``rejected`` as
  :class:`~ingest.spool.Damage` names them); a range counts its ``records_at_least``, and at least 1;
- ``trajlake_recorder_send_seconds``: from a record's append to the spool to Kafka's
  acknowledgement (records recovered from an earlier process are not observed: their append time
  is not known);
- ``trajlake_recorder_send_retries_total``: records handed to Kafka again (after a failure, a
  stall, an outage or a restart);
- ``trajlake_shipper_records_total`` / ``trajlake_shipper_errors_total``: records the worker's
  shipper had acknowledged by Kafka, and the delivery errors it hit (a failed record, a send that
  raised or a stall: each resets its producer and re-sends from the acknowledged position).

Why the spool gauges sum over live spools instead of a label per spool directory: a worker
process owns one spool, so the sum is that spool's value, and a process that opens several in turn
(``trajlake spool drain``, tests) leaves no stale series behind for a closed one; the collector
holds weak references, so a spool that is dropped without ``close()`` is forgotten too.

The shipper runs in a process of its own that serves no port; the worker follows its progress
file anyway (:class:`~ingest.shipper.ShippedDelivery`), and :class:`ShipperProgressCounts` turns
what that file reports into this process's counters, so the worker's metrics port shows them.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ingest.shipper import Progress
    from ingest.spool import Spool

PENDING = "trajlake_spool_pending_records"
OLDEST_AGE = "trajlake_spool_oldest_pending_age_seconds"

DAMAGED = Counter(
    "trajlake_spool_damaged_records",
    "Records set aside in a spool's quarantine (damaged, torn, truncated, missing or rejected by Kafka).",
    ["kind"],
)
SEND_SAMPLE_EVERY = 16
"""One record in this many is timed into ``SEND_SECONDS`` (an observation costs microseconds, a
record's whole recording not many more: timing each would slow the hot path by a fifth)."""
SEND_SECONDS = Histogram(
    "trajlake_recorder_send_seconds",
    "Seconds from a record's append to the spool to Kafka's acknowledgement (one record in 16 timed).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
SEND_RETRIES = Counter("trajlake_recorder_send_retries", "Records handed to Kafka again.")
SHIPPER_RECORDS = Counter("trajlake_shipper_records", "Records the shipper had acknowledged by Kafka.")
SHIPPER_ERRORS = Counter(
    "trajlake_shipper_errors", "Delivery errors of the shipper (each resets its producer and re-sends)."
)

_spools: weakref.WeakSet[Spool] = weakref.WeakSet()
_spools_lock = threading.Lock()


def track_spool(spool: Spool) -> None:
    """Count an open spool in the spool gauges (until :func:`untrack_spool` or garbage collection)."""
    with _spools_lock:
        _spools.add(spool)


def untrack_spool(spool: Spool) -> None:
    """Stop counting a spool (it was closed: what it holds is the next owner's)."""
    with _spools_lock:
        _spools.discard(spool)


def record_damage(kind: str, records_at_least: int) -> None:
    """Count one range newly kept in a spool's quarantine."""
    DAMAGED.labels(kind).inc(max(1, records_at_least))


class _SpoolCollector(Collector):
    """The spool gauges, read from the open spools when scraped."""

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(PENDING, _PENDING_HELP), GaugeMetricFamily(OLDEST_AGE, _AGE_HELP)]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with _spools_lock:
            spools = list(_spools)
        yield GaugeMetricFamily(PENDING, _PENDING_HELP, value=sum(s.pending for s in spools))
        yield GaugeMetricFamily(
            OLDEST_AGE, _AGE_HELP, value=max((s.oldest_pending_age for s in spools), default=0.0)
        )


_PENDING_HELP = "Records appended to the spools of this process and not yet acknowledged by Kafka."
_AGE_HELP = "Age of the oldest record not yet acknowledged by Kafka (0 when none)."
REGISTRY.register(_SpoolCollector())


class ShipperProgressCounts:
    """Turns a shipper's progress reports (``SHIPPED``) into this process's shipper counters.

    The report's counts are the shipper's since it started (a restarted shipper has a new pid and
    counts from 0), so each report adds what grew since the last one of the same pid. Damage the
    shipper found is read from the lines it added to the spool's quarantine index, so it is
    counted in records, once, like the damage this process quarantines itself.

    Args:
        directory: the spool directory.
        baseline: the report there when the worker started (an earlier run's counts, not counted).
    """

    def __init__(self, directory: Path, baseline: Progress | None) -> None:
        self._index = Path(directory) / "quarantine" / "index.jsonl"
        try:
            self._offset = self._index.stat().st_size  # what is there now was counted (or is old)
        except OSError:
            self._offset = 0
        self._last = self._key(baseline) if baseline is not None else None

    @staticmethod
    def _key(p: Progress) -> tuple[int, int, int, int, int]:
        return p.pid, p.acknowledged, p.resets, p.resent, p.damaged + p.torn + p.truncated + p.rejected

    def observe(self, progress: Progress | None) -> None:
        """Count what grew since the last report."""
        if progress is None:
            return
        now = self._key(progress)
        last = self._last if self._last is not None and self._last[0] == now[0] else (now[0], 0, 0, 0, 0)
        self._last = now
        acked, errors, resent, damage = (max(0, a - b) for a, b in zip(now[1:], last[1:], strict=True))
        if acked:
            SHIPPER_RECORDS.inc(acked)
        if errors:
            SHIPPER_ERRORS.inc(errors)
        if resent:
            SEND_RETRIES.inc(resent)
        if damage:
            self._count_new_damage()

    def _count_new_damage(self) -> None:
        try:
            with open(self._index, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return
        whole = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        self._offset += len(whole)
        for line in whole.splitlines():
            try:
                entry = json.loads(line)
                record_damage(str(entry["kind"]), int(entry.get("records_at_least") or 0))
            except (ValueError, KeyError, TypeError):
                continue
