"""The stand-in servers' answer: one JSON document over HTTP, as a real server sends it."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, doc: Any, status: int = 200) -> None:
    """Answer ``handler``'s request with ``doc`` as JSON (its length given, so clients read it whole)."""
    data = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
