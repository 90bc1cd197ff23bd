"""Prometheus metrics of the pipeline (the process's default registry; served by ``--metrics-port``).

- ``trajlake_pipeline_consumer_lag{topic, partition}``: records in the log the lake does not hold
  yet, as of the last plan (set by :func:`pipelines.plan_batch`: the log's end minus the offset
  the tables committed);
- ``trajlake_pipeline_batches_total``, ``trajlake_pipeline_batch_failures_total``;
- ``trajlake_pipeline_batch_seconds``: a micro-batch's wall time, Kafka read to last commit;
- ``trajlake_pipeline_records_total``: records folded; ``trajlake_pipeline_quarantined_total``:
  records sent to quarantine (malformed, or the losing copy of a conflict);
- ``trajlake_pipeline_last_batch_timestamp_seconds``: when the last batch committed (Unix time);
- ``trajlake_lake_commit_retries_total{table}`` comes from the lake (:mod:`lake.store`).

A quarantine *rate* is ``rate(quarantined) / rate(records)``, and the alert rules in
``infra/prometheus/alerts.yml`` compute it so.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

LAG = Gauge(
    "trajlake_pipeline_consumer_lag",
    "Records in the log the lake does not hold yet, per partition, as of the last plan.",
    ["topic", "partition"],
)
BATCHES = Counter("trajlake_pipeline_batches", "Micro-batches committed.")
BATCH_FAILURES = Counter("trajlake_pipeline_batch_failures", "Micro-batches that raised (re-run later).")
BATCH_SECONDS = Histogram(
    "trajlake_pipeline_batch_seconds",
    "Wall time of one micro-batch, from reading the log to the last commit.",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
RECORDS = Counter("trajlake_pipeline_records", "Records of the log folded into the lake.")
QUARANTINED = Counter("trajlake_pipeline_quarantined", "Records sent to the quarantine table.")
LAST_BATCH = Gauge("trajlake_pipeline_last_batch_timestamp_seconds", "Unix time the last batch committed.")

QUARANTINE_COUNTERS = ("ParseAndValidate.quarantined", "DedupEvents.conflicts")
"""The batch counters (Beam's and the eager executor's, same names) of records sent to quarantine."""


def record_lag(ends: dict[tuple[str, int], int], starts: dict[tuple[str, int], int]) -> None:
    """Set the lag of every partition planned: its end offset minus the lake's next offset."""
    for (topic, part), end in ends.items():
        LAG.labels(topic, str(part)).set(max(0, end - starts.get((topic, part), 0)))


def record_batch(records: int, seconds: float, counters: dict[str, Any]) -> None:
    """Count one committed batch."""
    BATCHES.inc()
    BATCH_SECONDS.observe(seconds)
    RECORDS.inc(records)
    QUARANTINED.inc(sum(int(counters.get(k, 0) or 0) for k in QUARANTINE_COUNTERS))
    LAST_BATCH.set(time.time())
