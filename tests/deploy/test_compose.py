"""The compose stack, up for real: brokers, s3proxy, the pipeline on S3, the API, Prometheus (opt-in).

Runs when ``TRAJLAKE_COMPOSE_TEST=1`` (root, a Docker engine, docker-compose): builds the image
offline (``infra/compose/build-images.sh``), brings the stack up, records trajectories through
the ``cli`` service, and reads them back from the API on the host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import FIXTURES
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("TRAJLAKE_COMPOSE_TEST") != "1",
        reason="the compose stack takes minutes: TRAJLAKE_COMPOSE_TEST=1 runs it",
    ),  # fmt: skip
]


def _compose(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker-compose", "-p", "trajlake-test", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_the_compose_stack_records_folds_and_serves(tmp_path: Path) -> None:
    assert shutil.which("docker-compose"), "docker-compose is not installed (apt-get install docker-compose)"
    build = subprocess.run(
        ["bash", "infra/compose/build-images.sh"], cwd=ROOT, capture_output=True, text=True, timeout=1800
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    fixtures = tmp_path / "fixtures"
    shutil.copytree(FIXTURES / "openhands", fixtures)
    try:
        up = _compose("up", "-d")
        assert up.returncode == 0, up.stderr
        wait_until(lambda: "min.insync.replicas 2" in _compose("logs", "topics").stdout, timeout=300,
                   what="the topics created on the cluster")  # fmt: skip
        rec = _compose("run", "--rm", "-v", f"{fixtures}:/fixtures:ro", "cli", "trajlake", "import",
                       "/fixtures/basic.json", "/fixtures/basic_interactions.json")  # fmt: skip
        assert rec.returncode == 0, rec.stdout + rec.stderr

        def served() -> bool:
            try:
                return httpx.get("http://127.0.0.1:8765/episodes", timeout=5).json().get("total") == 2
            except (httpx.HTTPError, ValueError):
                return False

        wait_until(served, timeout=300, what="the two episodes folded into the S3 lake and served")
        assert httpx.get("http://127.0.0.1:8765/health", timeout=5).json()["status"] == "ok"

        def scraped() -> bool:  # the stack's Prometheus scrapes the pipeline and the API
            try:
                got = httpx.get("http://127.0.0.1:9090/api/v1/targets", timeout=5).json()["data"]
            except (httpx.HTTPError, ValueError, KeyError):
                return False
            up = {t["labels"]["job"] for t in got["activeTargets"] if t["health"] == "up"}
            return up == {"pipeline", "api"}

        wait_until(scraped, timeout=120, what="Prometheus scraping the pipeline and the API")

        def records_folded() -> float:  # (a target is up from its first scrape, maybe before the fold)
            query = {"query": "trajlake_pipeline_records_total"}
            got = httpx.get("http://127.0.0.1:9090/api/v1/query", params=query, timeout=5).json()
            return sum(float(r["value"][1]) for r in got["data"]["result"])

        wait_until(lambda: records_folded() > 0, timeout=120,
                   what="Prometheus holding the records the pipeline folded")  # fmt: skip
    finally:
        _compose("down", "-v", timeout=300)
