"""A short run of ``bench/ingest.py``: every variant delivers the whole workload and is reported.

The benchmark itself (50k events x 5 rounds) is run by hand; its numbers are in the README.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


def test_ingest_bench_runs_every_client_and_reports_their_ratios(tmp_path: Path) -> None:
    out = tmp_path / "ingest.json"
    done = subprocess.run(
        [sys.executable, "bench/ingest.py", "--events", "1500", "--rounds", "1", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = json.loads(out.read_text())
    variants = got["variants"]
    # the recorder on each client, and each raw client; each run acknowledged every event (else the
    # bench stops with an error)
    assert set(variants) == {
        "recorder",
        "recorder-inline",
        "recorder-confluent",
        "kafka-python",
        "confluent-kafka",
    }
    assert all(v["median_events_per_s"] > 0 and len(v["rounds"]) == 1 for v in variants.values())
    ratio = (
        variants["recorder-confluent"]["median_events_per_s"]
        / variants["confluent-kafka"]["median_events_per_s"]
    )
    assert got["ratio_recorder_confluent_over_c"] == pytest.approx(ratio)
    assert got["target_confluent"]["threshold"] == 0.8
    assert "a''/c" in done.stdout
