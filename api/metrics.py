"""Prometheus metrics of the query API, and the ASGI layer that answers ``HEAD`` like ``GET``.

Each app has a registry of its own (tests build many apps in one process). ``GET /metrics``
answers it in Prometheus' text format, with no token: it holds counts and latencies, never a
row of the lake. What it counts:

- ``trajlake_api_requests_total{method, route, status}``: requests answered, by route template
  (``/episodes/{episode_id}``, never the id itself: the label set stays bounded; a path that
  matched no route is ``unmatched``);
- ``trajlake_api_request_seconds{route}``: time to the end of the response body;
- ``trajlake_api_in_flight``: requests being answered now;
- ``trajlake_api_cache_{hits,misses,evictions}_total``, ``trajlake_api_cache_{entries,bytes}``:
  the snapshot cache (:class:`api.lake_reader.LakeReader`), read at scrape time;
- ``trajlake_lake_table_version{table}``: the latest Delta version of each table that exists.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from api.lake_reader import LakeReader
from schemas.tables import TABLES

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds; the 200 ms the API is held to falls on a boundary."""


class _LakeCollector(Collector):
    """Cache and table-version metrics, read from the reader when Prometheus scrapes."""

    def __init__(self, reader: LakeReader) -> None:
        self._reader = reader

    def collect(self) -> Iterator[Any]:
        stats = self._reader.stats
        for name, value, doc in (
            ("hits", stats.hits, "Snapshot cache hits."),
            ("misses", stats.misses, "Snapshot cache misses (a table version read from the lake)."),
            ("evictions", stats.evictions, "Snapshots evicted to stay within the cache's bounds."),
        ):
            counter = CounterMetricFamily(f"trajlake_api_cache_{name}", doc)
            counter.add_metric([], value)
            yield counter
        for name, value, doc in (
            ("entries", stats.entries, "Snapshots held by the cache."),
            ("bytes", stats.bytes, "Bytes of Arrow data held by the cache."),
        ):
            gauge = GaugeMetricFamily(f"trajlake_api_cache_{name}", doc)
            gauge.add_metric([], value)
            yield gauge
        versions = GaugeMetricFamily(
            "trajlake_lake_table_version", "Latest Delta version of each table.", labels=["table"]
        )
        for table in TABLES:
            try:
                latest = self._reader.latest(table)
            except Exception:  # a damaged table: /health says which; a scrape never fails for it
                continue
            if latest is not None:
                versions.add_metric([table], latest)
        yield versions


class ApiMetrics:
    """The metrics of one app, in a registry of its own."""

    def __init__(self, reader: LakeReader) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "trajlake_api_requests",
            "Requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "trajlake_api_request_seconds",
            "Seconds from a request's arrival to the end of its response.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge("trajlake_api_in_flight", "Requests being answered.", registry=self.registry)
        self.registry.register(_LakeCollector(reader))


METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Method label values; any other method a client sends is counted as ``other`` (every label
value comes from a closed set, so no client can grow the label set)."""


def _route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class MetricsAndHead:
    """ASGI middleware: counts and times every request; ``HEAD`` is answered as ``GET`` without a body."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI call, counted and timed by the route template it matched."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        head = method == "HEAD"
        if head:
            scope = dict(scope, method="GET")
        status = 500
        start = time.perf_counter()
        self.metrics.in_flight.inc()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif head and message["type"] == "http.response.body":
                message = dict(message, body=b"")
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.in_flight.dec()
            route = _route_of(scope)
            label = method if method in METHODS else "other"
            self.metrics.requests.labels(label, route, str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - start)
