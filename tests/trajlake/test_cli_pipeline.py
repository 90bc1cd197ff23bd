"""The pipeline commands as a user runs them: run --once/--follow, replay, lake diff/show."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from ingest import EpisodeRecorder
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from schemas import TABLES
from tests.trajlake.test_cli import TRAJLAKE, run

pytestmark = pytest.mark.kafka


def record(bootstrap: str, home: Path, n: int, worker: str = "w") -> None:
    with EpisodeRecorder.open(bootstrap=bootstrap, home=home, worker_id=worker) as rec:
        for i in range(n):
            with rec.episode(task={"id": f"t{i}"}, policy={"id": "p"}) as ep:
                c = ep.tool_call("bash", {"command": "pytest"})
                ep.tool_result(c, exit_code=i % 2, stdout="AssertionError: assert 1 == 2" if i % 2 else "ok")
                ep.reward(
                    judge_name="tests",
                    judge_version="v1",
                    score=float(i % 2 == 0),
                    verdict="pass" if i % 2 == 0 else "fail",
                )
        rec.flush()


def test_run_once_replay_diff_and_show(fresh_broker: EmbeddedKafka, tmp_path: Path) -> None:
    home = fresh_broker.home
    port = fresh_broker.port
    fresh_broker.start()
    record(fresh_broker.bootstrap, home, 12)
    out = run(home, port, "pipeline", "run", "--once").stdout
    assert "done" in out
    lake = home / "lake"
    for name in ("events", "quarantine", "episodes", "steps", "rewards", "failures"):
        assert [f.name for f in DeltaTable(str(lake / name)).schema().fields] == TABLES[name].names
    assert Lake(lake).read("episodes").num_rows == 12
    assert Lake(lake).read("failures").num_rows == 6
    versions = Lake(lake).versions()
    run(home, port, "pipeline", "run", "--once")  # again: nothing to add
    assert Lake(lake).versions() == versions
    run(home, port, "replay", "--into", str(tmp_path / "replayed"))
    assert "yes" in run(home, port, "lake", "diff", str(lake), str(tmp_path / "replayed")).stdout
    # A lake that differs makes diff fail.
    record(fresh_broker.bootstrap, home, 1, worker="w2")
    run(home, port, "pipeline", "run", "--once")
    proc = run(home, port, "lake", "diff", str(lake), str(tmp_path / "replayed"), check=False)
    assert proc.returncode == 1 and "only in A" in proc.stdout
    rows = [
        json.loads(x)
        for x in run(home, port, "lake", "show", "episodes", "--version", "1").stdout.splitlines()
    ]
    assert len(rows) == 12  # time travel: the table as the first run left it


def test_follow_processes_new_events_and_stops_cleanly_on_sigterm(fresh_broker: EmbeddedKafka) -> None:
    import os

    home = fresh_broker.home
    fresh_broker.start()
    env = {**os.environ, "TRAJLAKE_HOME": str(home), "TRAJLAKE_KAFKA_BOOTSTRAP": fresh_broker.bootstrap}
    proc = subprocess.Popen(
        [TRAJLAKE, "pipeline", "run", "--follow", "--interval", "0.5"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        record(fresh_broker.bootstrap, home, 5)
        deadline = time.monotonic() + 120
        lake = Lake(home / "lake")
        while time.monotonic() < deadline:
            if lake.exists("episodes") and lake.read("episodes").num_rows == 5:
                break
            time.sleep(0.5)
        assert lake.read("episodes").num_rows == 5
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped after" in out


def test_lake_sql_and_maintain_run_on_spark(fresh_broker: EmbeddedKafka) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    for batch in range(3):  # three pipeline runs: three small files per table partition
        record(fresh_broker.bootstrap, home, 4, worker=f"w{batch}")
        run(home, port, "pipeline", "run", "--once")
    out = run(
        home, port, "lake", "sql", "SELECT status, count(*) AS n FROM episodes GROUP BY status", "--json"
    )
    assert sorted(json.loads(line)["n"] for line in out.stdout.splitlines()) == [6, 6]
    lake = Lake(home / "lake")
    rows = lake.read("events").num_rows
    files = len(lake.table("events").file_uris())
    refused = run(home, port, "lake", "maintain", "--table", "events", "--retain-hours", "0", check=False)
    # refused by the command line before Spark starts (a usage error)
    assert refused.returncode == 2 and "safety bound" in refused.stderr
    out = run(
        home, port, "lake", "maintain", "--table", "events", "--retain-hours", "0", "--allow-short-retention"
    ).stdout
    assert "events" in out and "episode_id" in out
    assert len(lake.table("events").file_uris()) < files and lake.read("events").num_rows == rows
    bad = run(home, port, "lake", "sql", "SELECT nope FROM episodes", check=False)
    assert bad.returncode == 1 and "query failed" in bad.stderr
