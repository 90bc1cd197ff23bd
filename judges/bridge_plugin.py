"""The pytest plugin of the judge's host run: the task's packages are imported through the bridge.

Loaded by :mod:`judges.host_run`'s bootstrap by path, as ``trajlake_bridge_plugin``
beside :mod:`judges.bridge` as ``trajlake_bridge`` (the judge's pytest then starts
without importing the ``judges`` package and what it pulls in); configured by
environment variables (the run is a child of the judge):

``TRAJLAKE_BRIDGE_TO`` / ``TRAJLAKE_BRIDGE_FROM``
    host paths of the two named pipes to the server in the sandbox.
``TRAJLAKE_BRIDGE_MODULES``
    comma-separated top-level names that come from the agent's workspace.
``TRAJLAKE_BRIDGE_STATUS``
    where to write what happened to the bridge (JSON), at the end.
``TRAJLAKE_BRIDGE_CONNECT_S``
    how long to wait for the server to open its end.
``TRAJLAKE_BRIDGE_ORDER``
    a seed (hex): the tests run in the order it shuffles them into. The agent's package keeps
    its state from one test to the next in the sandbox, so answers replayed by call count in
    the order the tests are written would pass; the seed is the judge's secret, so the order
    can be neither known nor learnt.
"""

from __future__ import annotations

import errno
import importlib.abc
import importlib.machinery
import json
import os
import random
import sys
import time
import types
from typing import Any

from trajlake_bridge import JUDGE, BridgeBroken, Peer  # judges/bridge.py, loaded by path

_state: dict[str, Any] = {"peer": None, "error": None, "tests_broken": []}


def _connect(to_path: str, from_path: str, timeout: float) -> tuple[int, int]:
    """Open both pipes without ever blocking past ``timeout`` (the server may never start)."""
    rfd = os.open(from_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    deadline = time.monotonic() + timeout
    while True:
        try:
            wfd = os.open(to_path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                os.close(rfd)
                why = f"the bridge's server in the sandbox did not start ({exc.strerror})"
                raise BridgeBroken(why) from exc
            time.sleep(0.005)
    os.set_blocking(wfd, True)
    os.set_blocking(rfd, True)
    return rfd, wfd


class _RemoteFinder(importlib.abc.MetaPathFinder):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", 1)[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, _RemoteLoader(), is_package=True)


class _RemoteLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        peer = _state["peer"]
        if peer is None:
            raise ImportError(f"{spec.name} lives in the sandbox and the bridge is down: {_state['error']}")
        remote = peer.request("import", spec.name)
        mod = types.ModuleType(spec.name)
        mod.__dict__["__getattr__"] = lambda name: getattr(remote, name)
        mod.__dict__["__bridge_remote__"] = remote
        mod.__path__ = []
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def pytest_configure(config: Any) -> None:
    """Connect to the server in the sandbox; route imports of the agent's modules to it."""
    names = {n for n in os.environ.get("TRAJLAKE_BRIDGE_MODULES", "").split(",") if n}
    try:
        rfd, wfd = _connect(
            os.environ["TRAJLAKE_BRIDGE_TO"],
            os.environ["TRAJLAKE_BRIDGE_FROM"],
            float(os.environ.get("TRAJLAKE_BRIDGE_CONNECT_S", "30")),
        )
        _state["peer"] = Peer(rfd, wfd, JUDGE)
    except (OSError, BridgeBroken) as exc:
        _state["error"] = str(exc)
    for name in names:  # nothing of the host may stand in for the agent's modules
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, _RemoteFinder(names))


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Run the tests in the order the judge's seed gives (see ``TRAJLAKE_BRIDGE_ORDER``)."""
    seed = os.environ.get("TRAJLAKE_BRIDGE_ORDER")
    if seed:
        items.sort(key=lambda item: item.nodeid)
        random.Random(int(seed, 16)).shuffle(items)


def pytest_runtest_logreport(report: Any) -> None:
    """Note the tests that failed after the bridge broke (evidence of where the run ended)."""
    peer = _state["peer"]
    if peer is not None and peer.broken and report.when == "call" and not report.passed:
        _state["tests_broken"].append(report.nodeid)


def pytest_unconfigure(config: Any) -> None:
    """Say goodbye to the server and write what happened to the bridge."""
    peer: Peer | None = _state["peer"]
    status = {
        "connected": peer is not None,
        "error": _state["error"],
        "broken": peer.broken if peer is not None else None,
        "requests": peer.requests if peer is not None else 0,
        "failed_after_break": _state["tests_broken"][:20],
    }
    if peer is not None:
        peer.close()
    path = os.environ.get("TRAJLAKE_BRIDGE_STATUS")
    if path:
        with open(path, "w") as fh:
            json.dump(status, fh)
