"""The API before anything was folded, its pure analysis, and `trajlake api serve` over real HTTP."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from api import InvalidRequestError, NotFoundError, create_app
from api.analysis import choose_judge, judge_versions, lineage
from lake import Lake
from schemas.tables import TABLES
from tests.conftest import free_port

TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))

EMPTY_ANSWERS: dict[str, dict[str, Any]] = {
    "/episodes": {"versions": {"episodes": None}, "total": 0, "items": []},
    "/failures/breakdown": {"judge": None, "judge_version": None, "total": 0, "groups": []},
    "/failures/breakdown?by=family": {"total": 0, "groups": []},
    "/failures/clusters": {"judge": None, "total_failures": 0, "total_clusters": 0, "clusters": []},
    "/judges": {"versions": {"rewards": None}, "judges": []},
    "/checkpoints": {"versions": {"checkpoints": None}, "total": 0, "items": []},
    "/episodes?verdict=fail": {"total": 0, "items": []},
}


@pytest.mark.parametrize("tables", ["none", "created"])
def test_a_lake_with_no_data_answers_empty_results(tmp_path: Path, tables: str) -> None:
    root = tmp_path / "lake"
    if tables == "created":
        Lake(root).ensure()  # every pipeline table at version 0, no rows
    with TestClient(create_app(root)) as c:
        for path, expected in EMPTY_ANSWERS.items():
            r = c.get(path)
            assert r.status_code == 200, (path, r.text)
            body = r.json()
            if tables == "created" and "versions" in expected:
                expected = {**expected, "versions": {k: 0 for k in expected["versions"]}}
            assert {k: body[k] for k in expected} == expected, path
        n = 0 if tables == "none" else len(TABLES)
        assert c.get("/health").json() == {"status": "ok", "tables": n, "damaged": [], "fix": None}
        assert c.get("/episodes/x").status_code == 404
        assert c.get("/judges/tests/diff").status_code == 404
        assert c.get("/").status_code == 200
        beyond = c.get("/episodes", params={"version": 1}).json()["detail"]
        if tables == "none":
            assert beyond == "table episodes does not exist yet, so it has no version 1"
        else:
            assert beyond == "table episodes has no version 1: its latest version is 0"


def _rewards(rows: list[tuple[str, str, str, int]]) -> pa.Table:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return pa.Table.from_pylist(
        [
            {
                "episode_id": e,
                "judge_name": judge,
                "judge_version": version,
                "event_id": f"ev-{i}",
                "ts": t0 + dt.timedelta(minutes=minute),
                "score": 1.0,
                "verdict": "pass",
                "source": "online",
            }
            for i, (e, judge, version, minute) in enumerate(rows)
        ],
        schema=TABLES["rewards"],
    )


def test_the_latest_judge_version_is_the_one_first_seen_last() -> None:
    # Version names are content hashes: "aaa" sorts first but appeared last.
    known = judge_versions(_rewards([("e1", "j", "zzz", 0), ("e2", "j", "aaa", 5), ("e3", "j", "zzz", 9)]))
    assert [v.version for v in known["j"]] == ["zzz", "aaa"]
    assert choose_judge(known, None, None) == ("j", "aaa")
    assert choose_judge(known, "j", "zzz") == ("j", "zzz")
    two = judge_versions(_rewards([("e1", "a", "1", 0), ("e1", "b", "1", 1)]))
    with pytest.raises(InvalidRequestError, match=r"several judges scored episodes \(a, b\)"):
        choose_judge(two, None, None)
    with pytest.raises(NotFoundError, match="no judge named 'c'; judges: a, b"):
        choose_judge(two, "c", None)


def test_lineage_reports_where_the_chain_breaks() -> None:
    rows = {
        "c": {"checkpoint_id": "c", "parent_id": "b"},
        "b": {"checkpoint_id": "b", "parent_id": "gone"},
        "x": {"checkpoint_id": "x", "parent_id": "y"},
        "y": {"checkpoint_id": "y", "parent_id": "x"},
    }
    chain, broken = lineage(rows, "c")
    assert [r["checkpoint_id"] for r in chain] == ["c", "b"] and broken == "gone"
    chain, broken = lineage(rows, "x")
    assert [r["checkpoint_id"] for r in chain] == ["x", "y"] and broken == "x"  # a loop
    with pytest.raises(NotFoundError):
        lineage(rows, "nope")


def test_serve_answers_health_and_the_page_over_http(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    Lake(lake).ensure()
    port = free_port()
    env = {**os.environ, "TRAJLAKE_HOME": str(tmp_path / "home"), "TRAJLAKE_API_TOKEN": "tok"}
    proc = subprocess.Popen(
        [TRAJLAKE, "api", "serve", "--port", str(port), "--lake", str(lake)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"{base}/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.2)
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "tables": 14, "damaged": [], "fix": None}
        page = httpx.get(f"{base}/", timeout=5)
        assert page.status_code == 200 and "<svg" in page.text and "failure analysis" in page.text
        assert httpx.get(f"{base}/tables", timeout=5).status_code == 401
        tables = httpx.get(f"{base}/tables", headers={"Authorization": "Bearer tok"}, timeout=5)
        assert tables.status_code == 200
        assert {t["name"] for t in tables.json()["tables"] if t["exists"]} == {
            "events",
            "quarantine",
            "episodes",
            "steps",
            "rewards",
            "failures",
            "samples",
            "tasks",
            "checkpoints",
            "failure_cases",
            "drift",
            "review_queue",
            "reviews",
            "retractions",
        }
        # Prometheus' text format, no token needed; the requests above counted by route template
        metrics = httpx.get(f"{base}/metrics", timeout=5)
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
        samples = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics.text.splitlines()
            if line and not line.startswith("#")
        }
        assert samples['trajlake_api_requests_total{method="GET",route="/tables",status="401"}'] == 1
        assert samples['trajlake_api_requests_total{method="GET",route="/tables",status="200"}'] == 1
        assert samples['trajlake_lake_table_version{table="episodes"}'] == 0
        assert 'trajlake_api_request_seconds_bucket{le="0.2",route="/health"}' in samples
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        flat = " ".join(err.split())  # the console wraps a long lake path
        assert f"on http://127.0.0.1:{port}/ (bearer token required)" in flat and "stopped (SIGTERM)" in flat
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
