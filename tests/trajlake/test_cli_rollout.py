"""``trajlake rollout`` as a user runs it against a chat server whose prompts break the token history."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from rollouts import HISTORY_BREAK_WARN
from tests.rollouts.test_worker import _ChatServer
from tests.trajlake.test_cli import pyfix_task, run

pytestmark = pytest.mark.kafka


def test_a_rollout_whose_calls_break_the_token_history_warns_and_says_so_in_its_summary(
    fresh_broker: EmbeddedKafka, tmp_path: Path, base_image: str
) -> None:
    home, port = fresh_broker.home, fresh_broker.port
    fresh_broker.start()
    tasks = pyfix_task(tmp_path)
    # each episode (one worker: one after the other): a look around, then submit; the server's second
    # prompt ids do not begin with the first prompt and completion, so every second call breaks its
    # history (half the calls)
    _ChatServer.replies = ["Let me look.\n```bash\ncat README.md\n```", "submit"] * 2
    _ChatServer.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    policy = f"openai:http://127.0.0.1:{server.server_port}/v1#test-model?logprobs=processed"
    try:
        out = run(home, port, "rollout", "--tasks", str(tasks), "--policy", policy, "--workers", "1",
                  "--episodes", "2", "--group-size", "2", "--json")  # fmt: skip
    finally:
        server.shutdown()
    report = json.loads(out.stdout)
    assert [e["history_breaks"] for e in report["episodes"]] == [1, 1]
    assert report["summary"] == {
        "episodes": 2, "statuses": {"failure": 2}, "model_calls": 4, "history_breaks": 2,
        "history_break_share": 0.5, "history_break_threshold": HISTORY_BREAK_WARN,
        "history_break_warning": True,
    }  # fmt: skip
    err = " ".join(out.stderr.split())
    assert "warning: 2 of 4 model calls (50%)" in err and "token history" in err
