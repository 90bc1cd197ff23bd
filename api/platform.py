"""The platform's health for the workbench, without Grafana: what the lake says, and what Prometheus says.

From the lake, always: each table's latest version, and the quarantine (rows, rows that arrived
in the last hour, the commonest reasons). From Prometheus, when the service is given its URL
(``trajlake api serve --prometheus URL``): the pipeline's lag, the quarantine rate, the sandbox
pools, the judges' error rate, and the alerts firing, each one instant query of the same
expressions the alert rules use. Prometheus unreachable or answering an error is reported in the
answer (``prometheus.error``), never as a failed request: the page still shows the lake's half.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, Field

QUERIES: dict[str, str] = {
    "pipeline_lag": "sum(trajlake_pipeline_consumer_lag)",
    "quarantine_rate": (
        "sum(rate(trajlake_pipeline_quarantined_total[10m]))"
        " / sum(rate(trajlake_pipeline_records_total[10m]))"
    ),
    "records_per_second": "sum(rate(trajlake_pipeline_records_total[5m]))",
    "sandbox_pool_size": "sum(trajlake_sandbox_pool_size)",
    "sandbox_in_use": "sum(trajlake_sandbox_pool_in_use)",
    "judge_error_rate": (
        'sum(rate(trajlake_judge_verdicts_total{verdict="error"}[10m]))'
        " / sum(rate(trajlake_judge_verdicts_total[10m]))"
    ),
}
"""What the health panel shows from Prometheus: name -> PromQL (one number each)."""

DEADLINE_S = 3.0
"""Most seconds one ``/platform`` request waits for Prometheus, all its queries together."""
MAX_BODY = 1 << 20
"""Most bytes of one Prometheus answer read (a larger one is an error, not a read)."""
FRESH_S = 5.0
"""Seconds a Prometheus reading is reused: readers of the page cannot multiply its load."""


class ReasonCountPublic(BaseModel):
    """How many quarantined records share a reason (its first 120 characters)."""

    reason: str
    count: int


class QuarantineHealthPublic(BaseModel):
    """The quarantine table in brief."""

    rows: int
    last_hour: int = Field(description="Records whose Kafka timestamp is within the last hour.")
    reasons: list[ReasonCountPublic] = Field(description="The commonest reasons, most first (up to 5).")


class AlertPublic(BaseModel):
    """An alert Prometheus holds (pending or firing)."""

    name: str
    state: str
    severity: str | None = None
    summary: str | None = None
    labels: dict[str, str] = {}


class PrometheusHealthPublic(BaseModel):
    """What the deployment's Prometheus answered."""

    url: str
    error: str | None = Field(default=None, description="Why nothing could be read (None: answered).")
    values: dict[str, float | None] = Field(
        default={}, description="Each query of the panel -> its value (None: no series yet)."
    )
    alerts: list[AlertPublic] = []


class PlatformPublic(BaseModel):
    """``GET /platform``: the lake's tables and quarantine, and Prometheus' view when it is configured."""

    versions: dict[str, int | None]
    quarantine: QuarantineHealthPublic
    prometheus: PrometheusHealthPublic | None = Field(
        description="None: the service was started without a Prometheus URL."
    )


def quarantine_health(table: pa.Table, now: dt.datetime | None = None) -> QuarantineHealthPublic:
    """Rows, rows of the last hour, and the five commonest reasons of a quarantine snapshot."""
    now = now or dt.datetime.now(dt.UTC)
    recent = 0
    if table.num_rows:
        ts = table["kafka_ts"]
        since = pa.scalar(now - dt.timedelta(hours=1), ts.type)
        recent = int(pc.sum(pc.fill_null(pc.greater_equal(ts, since), False).cast(pa.int64())).as_py() or 0)
    reasons: list[ReasonCountPublic] = []
    if table.num_rows:
        short = pc.utf8_slice_codeunits(table["error"], 0, 120)
        counted = pa.table({"reason": short}).group_by("reason").aggregate([("reason", "count")])
        rows = sorted(counted.to_pylist(), key=lambda r: (-r["reason_count"], r["reason"]))[:5]
        reasons = [ReasonCountPublic(reason=r["reason"], count=r["reason_count"]) for r in rows]
    return QuarantineHealthPublic(rows=table.num_rows, last_hour=recent, reasons=reasons)


def _value(result: list[Any]) -> float | None:
    if not result:
        return None
    try:
        value = float(result[0]["value"][1])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise _Unreadable("a sample without a value") from exc
    return None if value != value else value  # NaN (0/0: nothing flowed) reads as no value


def shown(url: str) -> str:
    """``url`` as readers may see it: without a user or password in it."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else "")))


class _Unreadable(Exception):
    """Prometheus answered something this panel cannot use."""


def _get(http: httpx.Client, url: str, params: dict[str, str] | None, deadline: float) -> Any:
    """One GET's JSON body, within what is left of ``deadline`` and :data:`MAX_BODY` bytes."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Unreadable(f"no answer within {DEADLINE_S:.0f} s")
    with http.stream("GET", url, params=params, timeout=left) as r:
        body = bytearray()
        for chunk in r.iter_bytes():
            body += chunk
            if len(body) > MAX_BODY:
                raise _Unreadable(f"an answer larger than {MAX_BODY >> 10} KiB")
            if time.monotonic() > deadline:
                raise _Unreadable(f"no answer within {DEADLINE_S:.0f} s")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _Unreadable(f"an answer that is not JSON ({r.status_code})") from exc
    if r.status_code != 200 or not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        raise _Unreadable(f"status {r.status_code}: {str(error)[:200] if error else 'not a success'}")
    return doc.get("data")


def _alert(raw: Any) -> AlertPublic:
    labels = raw.get("labels") if isinstance(raw, dict) else None
    if not isinstance(labels, dict):
        raise _Unreadable("an alert without labels")
    annotations = raw.get("annotations")
    summary = annotations.get("summary") if isinstance(annotations, dict) else None
    return AlertPublic(
        name=str(labels.get("alertname", "?")),
        state=str(raw.get("state", "?")),
        severity=None if labels.get("severity") is None else str(labels["severity"]),
        summary=None if summary is None else str(summary)[:500],
        labels={str(k): str(v)[:200] for k, v in labels.items() if k not in ("alertname", "severity")},
    )


def prometheus_health(url: str, client: httpx.Client | None = None) -> PrometheusHealthPublic:
    """Each panel query's value and the alerts, read from Prometheus' HTTP API at ``url``.

    Whatever Prometheus answers (nothing, garbage, too much, too slowly) ends in ``error``, never
    in an exception: the reading is bounded by :data:`DEADLINE_S` and :data:`MAX_BODY`.
    """
    base = url.rstrip("/")
    own = client is None
    http = client or httpx.Client()
    deadline = time.monotonic() + DEADLINE_S
    try:
        values: dict[str, float | None] = {}
        for name, expr in QUERIES.items():
            data = _get(http, f"{base}/api/v1/query", {"query": expr}, deadline)
            if not isinstance(data, dict) or not isinstance(data.get("result"), list):
                raise _Unreadable(f"query {name}: no result list")
            values[name] = _value(data["result"])
        data = _get(http, f"{base}/api/v1/alerts", None, deadline)
        raw = data.get("alerts") if isinstance(data, dict) else None
        if not isinstance(raw, list):
            raise _Unreadable("no alert list")
        alerts = sorted((_alert(a) for a in raw[:200]), key=lambda a: (a.state != "firing", a.name))
        return PrometheusHealthPublic(url=shown(url), values=values, alerts=alerts)
    except Exception as exc:  # noqa: BLE001 - the panel reports what it could not read; the page goes on
        why = str(exc) if isinstance(exc, _Unreadable) else f"{type(exc).__name__}: {exc}"
        return PrometheusHealthPublic(
            url=shown(url),
            error=f"Prometheus at {shown(url)} could not be read: {why.replace(url, shown(url))}",
        )
    finally:
        if own:
            http.close()
