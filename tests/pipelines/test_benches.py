"""Short seeded runs of the pipeline benchmarks: their command lines and output contracts hold.

The benchmarks themselves (``bench/pipeline.py`` on 200k events with Spark, ``bench/scale.py
--batch-latency`` to millions of events) are run by hand; their numbers are in the README.
Each run here starts its own broker, as the benchmarks do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_batch_latency_bench_grows_a_lake_and_reports_each_point(tmp_path: Path) -> None:
    out = tmp_path / "points.json"
    done = _run(
        ["bench/scale.py", "--batch-latency", "--max-events", "3000", "--batch-events", "300",
         "--json", str(out), "--plot", str(tmp_path / "curve.png")],
        timeout=900,
    )  # fmt: skip
    points = json.loads(out.read_text())
    assert [p["lake_events"] for p in points] == [0, 3000]
    for p in points:
        assert p["batch_s"] > 0 and len(p["batch_s_each"]) == 3
        # the batch's dedup lookup reads events files; DataFusion's metrics name them
        assert p["files_read"] >= 1 and p["files_read_by_table"]["events"] >= 1
    assert (tmp_path / "curve.png").stat().st_size > 0
    assert "batch-latency slope" in done.stdout


def test_pipeline_bench_writes_every_row_and_freshness(tmp_path: Path) -> None:
    out = tmp_path / "pipeline.json"
    _run(
        ["bench/pipeline.py", "--events", "1500", "--skip-spark", "--freshness-events", "300",
         "--json", str(out)],
        timeout=900,
    )  # fmt: skip
    got = json.loads(out.read_text())
    for row in ("trajlake", "trajlake_warm", "plain"):
        assert "warning" not in got["rows"][row]
        assert got["rows"][row]["events"] == got["events"] and got["rows"][row]["events_per_s"] > 0
    for row in ("spark_cold", "spark_warm"):
        assert "skipped" in got["rows"][row]["error"]
    fresh = got["freshness"]
    assert fresh["freshness_missing"] == 0 and fresh["freshness_n"] > 0
    assert 0 < fresh["freshness_p50_s"] <= fresh["freshness_p99_s"]
