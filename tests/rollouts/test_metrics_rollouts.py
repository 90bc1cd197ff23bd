"""A rollout worker process serves its own Prometheus metrics on the port it is given.

The recorder, the sandbox pool and the judge run in the worker processes, so that is where their
metrics are; ``trajlake rollout --metrics-port N`` has worker ``i`` serve on ``N + i``.
"""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path
from typing import Any

from rollouts import RolloutConfig, run_rollouts
from rollouts.errors import RolloutWorkerError
from rollouts.sampler import Assignment
from tests.conftest import free_port
from tests.waiting import wait_until


def waiting_policy(spec: str, *, worker_index: int) -> Any:
    """A policy factory (run in the worker): holds the worker until the file ``spec`` exists, then fails."""
    wait_until(lambda: Path(spec).exists(), what="the test's release")
    raise RuntimeError("released by the test")


def test_a_rollout_worker_serves_its_own_metrics_on_the_port_it_is_given(tmp_path: Path) -> None:
    port = free_port()
    release = tmp_path / "release"
    cfg = RolloutConfig(
        bootstrap="127.0.0.1:1",  # never reached: the worker stops before it records anything
        home=str(tmp_path),
        topic="unused",
        policy_factory=f"{__name__}:waiting_policy",
        policy_spec=str(release),
        workers=1,
        metrics_port=port,
        metrics_server="infra.metrics:serve_metrics",
    )
    said: list[str] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            run_rollouts(cfg, [Assignment(str(tmp_path / "no-task"), "g", 0)], on_metrics=said.append)
        except BaseException as exc:  # noqa: BLE001 - looked at below
            failed.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        wait_until(lambda: said, what="the worker's metrics address")
        url = f"http://127.0.0.1:{port}/metrics"
        assert said == [f"worker 0: metrics on {url}"]
        body = urllib.request.urlopen(url, timeout=30).read().decode()
        # the worker's own registry: its (empty) spools, pools and judges
        assert "trajlake_spool_pending_records 0.0" in body
        assert "# TYPE trajlake_sandbox_acquires_total counter" in body
        assert "# TYPE trajlake_judge_verdicts_total counter" in body
    finally:
        release.touch()
        runner.join(120)
    [exc] = failed
    assert isinstance(exc, RolloutWorkerError) and "released by the test" in str(exc)
