"""Serving a process's Prometheus metrics on a port of its own (``--metrics-port``)."""

from __future__ import annotations

from prometheus_client import start_http_server

from schemas.errors import TrajlakeError


class MetricsPortError(TrajlakeError):
    """The metrics port could not be bound."""


def serve_metrics(port: int, host: str = "127.0.0.1") -> int:
    """Serve the process's default registry at ``http://host:port/metrics`` from a daemon thread.

    Args:
        port: the port; 0 picks a free one.
        host: the address to bind (the loopback by default; ``0.0.0.0`` in a container).

    Returns:
        The port bound.

    Raises:
        MetricsPortError: the port is taken or may not be bound; the message says which.
    """
    try:
        server, _thread = start_http_server(port, addr=host)
    except OSError as exc:
        raise MetricsPortError(
            f"cannot serve metrics on {host}:{port} ({exc.strerror or exc}): choose another --metrics-port"
        ) from exc
    return int(server.server_port)
