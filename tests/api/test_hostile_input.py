"""What an outside review of the API found, each as a class of input it must survive.

Everything in the lake can come from an adversary (a policy's tool calls, an imported trajectory),
and so can every request: no request may grow the metrics' label set, exhaust the JSON parser's
stack, reach the file system with its own name, slip a parameter past the guards, or turn a
misbehaving Prometheus into a failed (or endless) request.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from api import create_app
from api import platform as platform_module
from api.analysis import JSON_DEPTH, parse_json, truncate_json
from lake import Lake
from tests.api.conftest import StoryLake

pytestmark = pytest.mark.kafka


def test_no_request_grows_the_metrics_label_set(client: TestClient) -> None:
    for i in range(20):
        client.request(f"M{i:03d}", "/metrics")
        client.get(f"/no/such/path/{i}")
    lines = [
        line for line in client.get("/metrics").text.splitlines() if "trajlake_api_requests_total{" in line
    ]
    methods = {line.split('method="')[1].split('"')[0] for line in lines}
    routes = {line.split('route="')[1].split('"')[0] for line in lines}
    assert methods <= {"GET", "HEAD", "POST", "other"} and "other" in methods
    assert "unmatched" in routes and not any("/no/such" in r for r in routes)


def test_json_nested_past_the_bound_is_text_and_every_json_is_cut_to_size() -> None:
    deep = "[" * 200_000 + "]" * 200_000
    assert parse_json(deep) == deep  # the parser's stack is never the limit
    assert parse_json("[" * (JSON_DEPTH + 1) + "]" * (JSON_DEPTH + 1)) == "[" * (JSON_DEPTH + 1) + "]" * (
        JSON_DEPTH + 1
    )
    assert parse_json("[" * JSON_DEPTH + "]" * JSON_DEPTH) is not None
    wide = {"k" * 5000: list(range(500)), **{str(i): i for i in range(300)}}
    cut, was_cut = truncate_json(wide, 100)
    assert was_cut and len(cut) == 100 and max(len(k) for k in cut) == 100
    nested, was_cut = truncate_json(json.loads("[" * 10 + "]" * 10), 10, depth=3)
    assert was_cut and nested == [[["…"]]]


def test_an_episode_whose_payload_nests_without_end_still_opens(
    story_lake: StoryLake, tmp_path: Path
) -> None:
    root = tmp_path / "lake"
    shutil.copytree(story_lake.root, root)
    lake = Lake(root)
    episode = story_lake.story.id("e1")
    row = lake.read("steps", where=f"episode_id = '{episode}'").to_pylist()[0]
    row["seq"], row["payload"] = 999, "[" * 200_000 + "]" * 200_000
    lake.write("steps", pa.Table.from_pylist([row], schema=lake.read("steps").schema), mode="upsert")
    with TestClient(create_app(root)) as c:
        r = c.get(f"/episodes/{episode}", params={"include_payload": True, "max_text": 50})
    assert r.status_code == 200, r.text
    step = next(s for s in r.json()["steps"] if s["seq"] == 999)
    assert step["payload"] == "[" * 50 and step["payload_truncated"]


def test_static_names_never_reach_the_file_system(client: TestClient) -> None:
    for name in ("a" * 5000 + ".js", "..%2Fapp.py", ".hidden.js", "APP.JS", "app.py", "%00.js"):
        r = client.get(f"/static/{name}")
        assert r.status_code == 404 and r.json()["error"] == "not_found", name
    assert client.get("/static/app.js").status_code == 200


def _cursor(doc: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def test_a_cursor_holds_only_what_the_parameters_could_and_a_value_is_given_once(client: TestClient) -> None:
    first = client.get("/episodes", params={"limit": 2}).json()
    doc = json.loads(base64.urlsafe_b64decode(first["next_cursor"] + "=="))
    for forged in ({**doc, "o": 2**64 + 5}, {**doc, "v": {"x" * 100: 1}}, {**doc, "v": {"episodes": 2**60}}):
        r = client.get("/episodes", params={"limit": 2, "cursor": _cursor(forged)})
        assert r.status_code == 422 and r.json()["detail"].startswith("cursor: not a cursor this API made")
    assert client.get("/episodes", params={"limit": 2, "cursor": _cursor(doc)}).status_code == 200
    twice = client.get("/episodes?limit=1&limit=2")
    assert twice.status_code == 422
    assert twice.json()["detail"] == "limit: give each of these once (it takes one value)"
    # a parameter that takes several values still does
    assert client.get("/review/queue?rule=a&rule=b").status_code == 200


class _Hostile(BaseHTTPRequestHandler):
    mode = "list"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()
        try:
            if self.mode == "list":
                self.wfile.write(b"[]")
            elif self.mode == "deep":
                self.wfile.write(b"[" * 100_000 + b"]" * 100_000)
            elif self.mode == "big":
                self.wfile.write(b'{"status":"success","data":{"result":[' + b"1," * 2_000_000 + b"1]}}")
            elif self.mode == "slow":
                for _ in range(20):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            elif self.mode == "labels":
                data = {"alerts": [{"labels": [1, 2]}]} if "alerts" in self.path else {"result": []}
                self.wfile.write(json.dumps({"status": "success", "data": data}).encode())
        except OSError:
            pass  # the client gave up: what it should do


@pytest.fixture
def hostile() -> Iterator[tuple[str, type[_Hostile]]]:
    handler = type("Handler", (_Hostile,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://reader:s3cret@127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("list", "status 200: not a success"),
        ("deep", "an answer that is not JSON (200)"),
        ("big", "an answer larger than 1024 KiB"),
        ("slow", "no answer within"),
        ("labels", "an alert without labels"),
    ],
)
def test_a_misbehaving_prometheus_is_reported_never_raised_nor_waited_on(
    hostile: tuple[str, type[_Hostile]], monkeypatch: pytest.MonkeyPatch, mode: str, said: str
) -> None:
    url, handler = hostile
    handler.mode = mode
    monkeypatch.setattr(platform_module, "DEADLINE_S", 1.0)
    panel = platform_module.prometheus_health(url)
    assert panel.error is not None and said in panel.error, panel.error
    assert (
        "s3cret" not in panel.error
        and "reader" not in panel.url
        and panel.url.startswith("http://127.0.0.1:")
    )
