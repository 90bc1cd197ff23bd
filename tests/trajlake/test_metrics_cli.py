"""``trajlake rollout --metrics-port``: a worker serves its metrics while it runs an episode.

The chat server holding the episode's model call open keeps the worker mid-episode (a sandbox
leased) until the test has read the worker's metrics, so nothing here depends on timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port
from tests.rollouts.json_reply import send_json
from tests.trajlake.test_cli import TRAJLAKE, pyfix_task
from tests.waiting import wait_until

pytestmark = pytest.mark.kafka


class _HeldChat(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat server that answers ``submit`` once the test releases it."""

    asked = threading.Event()
    release = threading.Event()

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).asked.set()
        type(self).release.wait(120)
        choice = {"message": {"role": "assistant", "content": "submit"}, "finish_reason": "stop"}
        send_json(self, {"model": json.loads(body)["model"], "choices": [choice]})

    def log_message(self, *args: Any) -> None:
        pass


def _samples(url: str) -> dict[str, float]:
    """Every sample the endpoint serves, summed over its labels (the backend is the settings')."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(urllib.request.urlopen(url, timeout=30).read().decode()):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_rollout_workers_serve_their_metrics_on_the_port_given(
    topics_env: dict[str, str], tmp_path: Path, base_image: str
) -> None:
    tasks = pyfix_task(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HeldChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    policy = (
        f"openai:http://127.0.0.1:{server.server_port}/v1#test-model?logprobs=processed"  # no probe calls
    )
    port = free_port()
    env = {**os.environ, **topics_env, "TRAJLAKE_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [TRAJLAKE, "rollout", "--tasks", str(tasks), "--policy", policy, "--workers", "1", "--episodes", "1",
         "--group-size", "1", "--json", "--metrics-port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(_HeldChat.asked.is_set, what="the worker's first model call")
        seen = _samples(f"http://127.0.0.1:{port}/metrics")
        # mid-episode: one sandbox leased from the worker's pool, and nothing judged yet
        assert seen["trajlake_sandbox_pool_in_use"] == 1 and seen["trajlake_sandbox_pool_size"] == 1
        assert seen["trajlake_sandbox_acquires_total"] == 1
        assert "trajlake_spool_pending_records" in seen
        assert "trajlake_judge_verdicts_total" not in seen
    finally:
        _HeldChat.release.set()
        out, err = proc.communicate(timeout=300)
        server.shutdown()
    assert proc.returncode == 0, out + err
    assert f"worker 0: metrics on http://127.0.0.1:{port}/metrics" in " ".join(err.split())
