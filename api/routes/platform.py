"""``/platform``: the platform's health for the workbench: the lake's side, and Prometheus'."""

from __future__ import annotations

import threading
import time

from fastapi import APIRouter, Request

from api.deps import ReaderDep
from api.lake_reader import versions_of
from api.platform import FRESH_S, PlatformPublic, prometheus_health, quarantine_health
from schemas.tables import TABLES

router = APIRouter(prefix="/platform", tags=["platform"])

_LOCK = threading.Lock()


@router.get("")
def platform(reader: ReaderDep, request: Request) -> PlatformPublic:
    """Each table's latest version, the quarantine in brief, and (when configured) Prometheus' panel.

    Prometheus' half holds the pipeline's lag, the quarantine rate, the sandbox pools, the judges'
    error rate and the alerts pending or firing; a Prometheus that cannot be read is said in
    ``prometheus.error``, and the lake's half is answered all the same.
    """
    quarantine = reader.snapshot("quarantine")
    versions = versions_of(quarantine)
    for name in TABLES:
        if name not in versions and not reader.problems(name):
            versions[name] = reader.latest(name)
    url: str | None = request.app.state.prometheus_url
    panel = None
    if url is not None:  # one reading per FRESH_S for all readers
        with _LOCK:
            at, cached = getattr(request.app.state, "prometheus_reading", (0.0, None))
            if cached is None or time.monotonic() - at > FRESH_S:
                cached = prometheus_health(url)
                request.app.state.prometheus_reading = (time.monotonic(), cached)
            panel = cached
    return PlatformPublic(versions=versions, quarantine=quarantine_health(quarantine.table), prometheus=panel)
