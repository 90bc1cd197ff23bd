"""Spool-backed delivery: every record is in the spool before the sink sees it.

:class:`Delivery` is the port the recorder writes to; it has two adapters,
``SpooledDelivery`` here (``inline``: the worker's own thread sends to Kafka)
and :class:`~ingest.shipper.ShippedDelivery` (``shipper``: a sidecar process
tails the spool). Both pass the same behavioural tests.

``SpooledDelivery`` joins a :class:`~ingest.spool.Spool` and an
:class:`~ingest.sink.EventSink`. While the sink is healthy a record is appended
to the spool and handed straight to the sink. The sink's receipts are *reaped*
in submission order (by the submitting thread every few hundred records, and by
a background thread every few milliseconds): an acknowledged receipt releases
its record from the spool, a failed one turns delivery *degraded*. While
degraded, new records only go to the spool, and the background thread re-sends
the failed and queued records in spool order once the sink answers again, then
turns healthy. Records an earlier process left in the spool are re-sent first.

Reaping receipts in bulk, instead of a callback per record on the Kafka I/O
thread, keeps the per-record cost to an append to a deque.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass

from ingest import metrics
from ingest.errors import DeliveryTimeoutError, IngestError, SinkError, SinkRejectedError
from ingest.kafka_sink import is_rejection
from ingest.sink import EventSink, Receipt
from ingest.spool import Damage, Segment, Spool
from schemas import fixes

log = logging.getLogger(__name__)

_Ref = tuple[Segment, int, int | None]  # (segment, position, partition)
_Pending = tuple[Receipt, Segment, int, int | None]

REAP_EVERY = 256
"""The submitting thread reaps receipts every this many records."""


@dataclass
class DeliveryStats:
    """Counters of a :class:`SpooledDelivery` (monotonic)."""

    submitted: int = 0
    """Records appended to the spool."""
    acknowledged: int = 0
    """Records the sink acknowledged (including redeliveries)."""
    failed: int = 0
    """Delivery failures reported by the sink (each is re-sent)."""
    redelivered: int = 0
    """Records re-sent from the spool (after a failure, an outage, or a restart)."""
    recovered: int = 0
    """Records found in the spool at start, left by an earlier process."""
    degraded_periods: int = 0
    """Times delivery turned degraded."""
    sink_resets: int = 0
    """Times a stalled sink was reset."""
    extra_abandoned: int = 0
    """In-flight records abandoned by sink resets (re-sent from the spool)."""
    damaged: int = 0
    """Damaged byte ranges found in the spool (quarantined; the intact records around them delivered)."""
    damaged_bytes: int = 0
    """Bytes in those ranges."""
    torn: int = 0
    """Torn tails found (a crash mid-append; nothing acknowledged was in them)."""
    rejected: int = 0
    """Records Kafka refused for good, quarantined."""


def count_damage(stats: DeliveryStats, found: list[Damage]) -> None:
    """Add what a spool's recovery quarantined to ``stats``."""
    for d in found:
        if d.kind == "torn":
            stats.torn += 1
        elif d.kind in ("damaged", "truncated", "missing"):
            stats.damaged += 1
            stats.damaged_bytes += d.size


class Delivery(ABC):
    """Where a recorder's serialized events go: durable first, acknowledged later, never lost.

    ``submit`` returns once the record is in the worker's spool (it survives a
    crash from then on); the record is released from the spool when Kafka
    acknowledges it.
    """

    spool: Spool
    """The worker's durable spool."""
    stats: DeliveryStats
    """What delivery did so far."""

    @property
    @abstractmethod
    def healthy(self) -> bool:
        """False while records wait in the spool for the broker to come back."""

    @abstractmethod
    def partition_for(self, topic: str, key: bytes) -> int | None:
        """The partition ``key`` maps to (``None``: unknown now; the sink then picks by key)."""

    @abstractmethod
    def submit(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> None:
        """Make one record durable and hand it over for delivery.

        Raises:
            SpoolError: the spool cannot take it (full, disk full, too large).
        """

    @property
    @abstractmethod
    def pending(self) -> int:
        """Records recorded and not yet acknowledged."""

    @abstractmethod
    def flush(self, timeout: float | None = 60.0) -> None:
        """Wait until every recorded record is acknowledged.

        Raises:
            DeliveryTimeoutError: records were still unacknowledged at the timeout (they stay in the spool).
        """

    @abstractmethod
    def close(self, timeout: float | None = 30.0) -> None:
        """Flush (best effort) and release everything; what is unacknowledged stays in the spool."""


class SpooledDelivery(Delivery):
    """Loss-free delivery of records through a durable spool.

    Args:
        spool: the durable spool (owned: closed by :meth:`close`).
        sink: where records go (owned: closed by :meth:`close`).
        retry_interval_s: how often a degraded delivery probes the sink.
        reap_interval_s: how often the background thread reaps receipts.
        stall_timeout_s: if the oldest receipt makes no progress for this long,
            the sink is reset (its in-flight records abandoned) and every
            unacknowledged record is re-sent from the spool. This bounds the
            damage of a client that wedges after an outage (seen with
            kafka-python's idempotent producer after batches expired).
    """

    def __init__(
        self,
        spool: Spool,
        sink: EventSink,
        *,
        retry_interval_s: float = 0.5,
        reap_interval_s: float = 0.02,
        stall_timeout_s: float = 15.0,
    ) -> None:
        self.spool = spool
        self.sink = sink
        self.retry_interval_s = retry_interval_s
        self.reap_interval_s = reap_interval_s
        self.stall_timeout_s = stall_timeout_s
        self._last_progress = time.monotonic()
        self.stats = DeliveryStats()
        # Re-entrant: reaping happens inside submit and inside the drain loop.
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._healthy = True
        self._pending: deque[_Pending] = deque()
        self._failed: list[_Ref] = []
        self._backlog: deque[_Ref] = deque()
        self._closed = False
        self._since_reap = 0
        recovered = spool.recover()
        count_damage(self.stats, spool.damage_found)
        if recovered:
            self.stats.recovered = len(recovered)
            self._healthy = False
            self.stats.degraded_periods += 1
            self._backlog.extend((r.segment, r.position, None) for r in recovered)
            log.info(
                "spool %s: re-sending %d records left by an earlier process", spool.directory, len(recovered)
            )
        self._thread = threading.Thread(target=self._run, name="trajlake-delivery", daemon=True)
        self._thread.start()

    @property
    def healthy(self) -> bool:
        """False while records wait in the spool for the sink to come back."""
        return self._healthy

    def partition_for(self, topic: str, key: bytes) -> int | None:
        """The partition the sink maps ``key`` to (``None`` when unknown).

        ``None`` while degraded too: asking a sink that is down would block the caller on metadata.
        """
        return self.sink.partition_for(topic, key) if self._healthy else None

    def submit(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> None:
        """Durably record one record, then hand it to the sink if it is healthy.

        Raises:
            SpoolFullError: the spool stayed full (the record was not recorded).
            SpoolError: the spool cannot be written.
        """
        seg, pos = self.spool.append(topic, key, value)
        with self._lock:
            self.stats.submitted += 1
            if not self._healthy:
                self._backlog.append((seg, pos, partition))
                return
            try:
                receipt = self.sink.send(topic, key, value, partition=partition)
            except SinkRejectedError as exc:
                self._set_aside(seg, pos, exc)
                return
            except SinkError as exc:
                self._degrade(exc)
                self._backlog.append((seg, pos, partition))
                return
            if not self._pending:
                self._last_progress = time.monotonic()
            self._pending.append((receipt, seg, pos, partition))
            self._since_reap += 1
            if self._since_reap >= REAP_EVERY:
                self._reap()

    def _degrade(self, exc: BaseException) -> None:
        # Caller holds the lock.
        if self._healthy:
            self._healthy = False
            self.stats.degraded_periods += 1
            log.warning("event sink unavailable (%s); spooling until it returns", exc)
        self._wake.notify_all()

    def _reap(self) -> None:
        """Settle the done receipts at the head of the queue (caller holds the lock)."""
        self._since_reap = 0
        pending = self._pending
        acked_seg: Segment | None = None
        acked_n = 0
        if pending and pending[0][0].is_done:
            self._last_progress = time.monotonic()
        while pending and pending[0][0].is_done:
            receipt, seg, pos, partition = pending.popleft()
            if receipt.exception is None:
                if seg is not acked_seg:
                    if acked_seg is not None:
                        self.spool.ack(acked_seg, acked_n)
                    acked_seg, acked_n = seg, 0
                acked_n += 1
                self.stats.acknowledged += 1
            elif is_rejection(receipt.exception):
                self._set_aside(seg, pos, receipt.exception)
            else:
                self.stats.failed += 1
                self._failed.append((seg, pos, partition))
                self._degrade(receipt.exception)
        if acked_seg is not None:
            self.spool.ack(acked_seg, acked_n)
        # Records whose receipts are done behind a pending head are settled next time.

    def _set_aside(self, seg: Segment, pos: int, exc: BaseException) -> None:
        """A record Kafka refuses for good: quarantined and counted, never retried forever."""
        try:
            self.spool.set_aside(seg, pos, f"kafka: {exc}")
        except IngestError:
            log.exception("cannot set aside the refused record %s:%d; it stays in the spool", seg.path, pos)
            return
        self.stats.rejected += 1
        log.error(
            "Kafka refused the record at %s:%d for good (%s); kept in quarantine", seg.path.name, pos, exc
        )

    def _stalled(self) -> bool:
        # Caller holds the lock.
        return bool(self._pending) and time.monotonic() - self._last_progress > self.stall_timeout_s

    def _abandon_inflight(self) -> None:
        """Give up on every unsettled receipt; queue its record for re-sending (lock held)."""
        redo: list[_Ref] = []
        for receipt, seg, pos, partition in self._pending:
            if receipt.is_done and receipt.exception is None:
                self.spool.ack(seg)
                self.stats.acknowledged += 1
            else:
                redo.append((seg, pos, partition))
        self._pending.clear()
        self._failed.extend(redo)
        self.stats.extra_abandoned += len(redo)

    def _run(self) -> None:
        while True:
            reset = False
            with self._lock:
                if self._healthy and not self._closed:
                    self._wake.wait(self.reap_interval_s)
                    self._reap()
                    if not self._stalled():
                        continue
                    self._degrade(SinkError("no acknowledgement progress"))
                if self._closed and not self._backlog and not self._failed:
                    self._reap()
                    return
                self._reap()
                # A record that failed after the client's own retries leaves the
                # client's sequence state for its partition unreliable, and a
                # stalled client may never answer: either way start a fresh
                # client session and re-send everything unacknowledged, in order.
                if self._pending and (self._failed or self._stalled()):
                    log.warning(
                        "event sink %s with %d records in flight; resetting it and re-sending from the spool",
                        "failed records" if self._failed else "stalled",
                        len(self._pending),
                    )
                    self._abandon_inflight()
                    self.stats.sink_resets += 1
                    reset = True
                # Let the sink finish (or fail) what it still holds, so that
                # re-sent records cannot overtake records still being retried.
                if self._pending:
                    batch: list[_Ref] = []
                else:
                    self._failed.sort(key=lambda r: (r[0].number, r[1]))
                    batch = self._failed + list(self._backlog)
                    self._failed = []
                    self._backlog.clear()
            if reset:
                self.sink.reset()
            if not batch:
                if self._closed:
                    return
                time.sleep(self.reap_interval_s)
                continue
            if not self.sink.probe():
                self._requeue(batch)
                if self._closed:
                    return
                time.sleep(self.retry_interval_s)
                continue
            sent = self._resend(batch)
            if sent < len(batch):
                self._requeue(batch[sent:])
                if self._closed:
                    return
                time.sleep(self.retry_interval_s)
                continue
            with self._lock:
                if not self._backlog and not self._failed:
                    self._healthy = True
                    log.info("event sink is back; delivery healthy")

    def _requeue(self, batch: list[_Ref]) -> None:
        with self._lock:
            self._backlog.extendleft(reversed(batch))

    def _resend(self, batch: list[_Ref]) -> int:
        """Send ``batch`` in order; return how many were handed over."""
        for i, (seg, pos, partition) in enumerate(batch):
            try:
                rec = self.spool.read(seg, pos)
            except (OSError, IngestError):
                log.exception("cannot read spooled record %s:%d; it stays on disk", seg.path, pos)
                continue
            if partition is None:
                partition = self.sink.partition_for(rec.topic, rec.key)
            try:
                receipt = self.sink.send(rec.topic, rec.key, rec.value, partition=partition)
            except SinkRejectedError as exc:
                self._set_aside(seg, pos, exc)
                continue
            except SinkError:
                return i
            with self._lock:
                self._pending.append((receipt, seg, pos, partition))
                self.stats.redelivered += 1
            metrics.SEND_RETRIES.inc()
        return len(batch)

    @property
    def pending(self) -> int:
        """Records recorded and not yet acknowledged."""
        return self.spool.pending

    def flush(self, timeout: float | None = 60.0) -> None:
        """Wait until every recorded record is acknowledged.

        Raises:
            DeliveryTimeoutError: records were still unacknowledged at the
                timeout; they remain in the spool and are not lost.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._healthy:
            try:
                self.sink.flush(timeout)
            except SinkError as exc:
                log.warning("sink flush failed: %s", exc)
        with self._lock:
            self._reap()
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self.spool.wait_drained(left):
            raise DeliveryTimeoutError(
                f"{self.spool.pending} records not acknowledged after {timeout}s; "
                f"they stay in the spool at {self.spool.directory} and are sent when the broker answers",
                fix=fixes.SPOOL_DRAIN,
            )

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush (best effort), stop redelivery and close the sink and spool.

        Records not acknowledged by then stay in the spool for the next start.
        """
        if self._closed:
            return
        try:
            self.flush(timeout)
        except DeliveryTimeoutError as exc:
            log.warning("%s", exc)
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        self._thread.join(timeout=5)
        self.sink.close()
        self.spool.close()
