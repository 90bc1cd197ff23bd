"""The event sink port: where recorded events go after the spool.

``EventSink`` is the port; :class:`~ingest.kafka_sink.KafkaSink` is the real
adapter and :class:`MemorySink` an in-memory one for fast unit tests of the
logic around it. Both pass the same behavioural tests.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

from ingest.errors import SinkUnavailableError


class Receipt(Protocol):
    """The pending outcome of one record handed to a sink (kafka-python's future fits)."""

    is_done: bool
    """Whether the outcome is known."""
    exception: BaseException | None
    """The delivery error once done, ``None`` if acknowledged."""


class EventSink(ABC):
    """Asynchronous, acknowledged delivery of keyed records to topics."""

    @abstractmethod
    def send(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Receipt:
        """Hand one record over for delivery; its receipt completes later.

        Args:
            topic: destination topic.
            key: record key (the episode id); records of one key stay ordered.
            value: record bytes.
            partition: explicit partition (must equal what the key maps to).

        Returns:
            A receipt that becomes done when the record is acknowledged
            (``exception is None``) or its delivery failed.

        Raises:
            SinkUnavailableError: the record could not even be handed over
                (broker unreachable, buffer full).
        """

    @abstractmethod
    def partition_for(self, topic: str, key: bytes) -> int | None:
        """The partition ``key`` maps to, or ``None`` when unknown right now."""

    @abstractmethod
    def flush(self, timeout: float | None = None) -> None:
        """Push out buffered records and wait for their completion."""

    @abstractmethod
    def probe(self) -> bool:
        """Whether the sink can take records now (cheap; used to leave degraded mode)."""

    @abstractmethod
    def reset(self) -> None:
        """Abandon every in-flight record and start afresh (a new client session).

        Receipts of abandoned records may never complete; the caller re-sends them.
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections; undelivered records fail their receipts."""


class MemoryReceipt:
    """Receipt of :class:`MemorySink`."""

    __slots__ = ("is_done", "exception")

    def __init__(self, done: bool = False) -> None:
        self.is_done = done
        self.exception: BaseException | None = None


_DONE = MemoryReceipt(True)


@dataclass
class MemorySink(EventSink):
    """An in-memory sink: records land in ``records``; can simulate an outage.

    Attributes:
        records: delivered ``(topic, key, value)`` tuples, in delivery order.
        partitions: number of partitions per topic for :meth:`partition_for`.
        down: while True, ``send`` raises and queued records are failed.
        auto_ack: acknowledge at once; otherwise records wait in ``inflight``
            until :meth:`deliver` or :meth:`fail_inflight`.
    """

    records: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    partitions: int = 8
    down: bool = False
    auto_ack: bool = True
    inflight: list[tuple[str, bytes, bytes, MemoryReceipt]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def send(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> Receipt:
        if self.down:
            raise SinkUnavailableError("memory sink is down")
        if self.auto_ack:
            with self._lock:
                self.records.append((topic, key, value))
            return _DONE
        receipt = MemoryReceipt()
        with self._lock:
            self.inflight.append((topic, key, value, receipt))
        return receipt

    def deliver(self) -> int:
        """Acknowledge every in-flight record; return how many."""
        with self._lock:
            batch, self.inflight = self.inflight, []
            self.records.extend((t, k, v) for t, k, v, _ in batch)
        for *_, receipt in batch:
            receipt.is_done = True
        return len(batch)

    def fail_inflight(self, error: BaseException | None = None) -> int:
        """Fail every in-flight record (as an expired Kafka batch would)."""
        with self._lock:
            batch, self.inflight = self.inflight, []
        for *_, receipt in batch:
            receipt.exception = error or SinkUnavailableError("delivery failed")
            receipt.is_done = True
        return len(batch)

    def partition_for(self, topic: str, key: bytes) -> int | None:
        return hash(key) % self.partitions

    def flush(self, timeout: float | None = None) -> None:
        return None

    def probe(self) -> bool:
        return not self.down

    def reset(self) -> None:
        with self._lock:
            self.inflight = []  # abandoned: their receipts never complete

    def close(self) -> None:
        self.fail_inflight(SinkUnavailableError("sink closed"))

    def values(self, topic: str | None = None) -> list[bytes]:
        """Delivered values, optionally of one topic."""
        with self._lock:
            return [v for t, _, v in self.records if topic is None or t == topic]

    def __hash__(self) -> int:  # dataclass(eq=True) would make it unhashable
        return id(self)

    def __eq__(self, other: Any) -> bool:
        return self is other
