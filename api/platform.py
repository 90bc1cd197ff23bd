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
from typing import Any

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

TIMEOUT_S = 2.0


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


def _value(result: list[dict[str, Any]]) -> float | None:
    if not result:
        return None
    value = float(result[0]["value"][1])
    return None if value != value else value  # NaN (0/0: nothing flowed) reads as no value


def prometheus_health(url: str, client: httpx.Client | None = None) -> PrometheusHealthPublic:
    """Each panel query's value and the alerts, read from Prometheus' HTTP API at ``url``."""
    base = url.rstrip("/")
    own = client is None
    http = client or httpx.Client(timeout=TIMEOUT_S)
    try:
        values: dict[str, float | None] = {}
        for name, expr in QUERIES.items():
            r = http.get(f"{base}/api/v1/query", params={"query": expr})
            body = r.json()
            if r.status_code != 200 or body.get("status") != "success":
                raise ValueError(f"query {name} answered {r.status_code}: {body.get('error', r.text[:200])}")
            values[name] = _value(body["data"]["result"])
        raw = http.get(f"{base}/api/v1/alerts").json()["data"]["alerts"]
        alerts = [
            AlertPublic(
                name=a["labels"].get("alertname", "?"),
                state=a.get("state", "?"),
                severity=a["labels"].get("severity"),
                summary=a.get("annotations", {}).get("summary"),
                labels={k: v for k, v in a["labels"].items() if k not in ("alertname", "severity")},
            )
            for a in raw
        ]
        alerts.sort(key=lambda a: (a.state != "firing", a.name))
        return PrometheusHealthPublic(url=url, values=values, alerts=alerts)
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return PrometheusHealthPublic(url=url, error=f"Prometheus at {url} could not be read: {exc}")
    finally:
        if own:
            http.close()
