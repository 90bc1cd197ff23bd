"""Run a task's hidden tests on the host, out of reach of the agent's code.

Two ways, by what a family's tests need (``hidden_tests.runs`` of the task):

``outputs``
    The tests only read files the agent produced. The workspace is exported
    (every process the agent left is killed first) and unpacked into a fresh
    directory on the host; the tests run there in the judge's own pytest. No
    code of the agent's runs while it is judged.
``bridge``
    The tests call the agent's package. They run in the judge's own pytest on
    the host; the package is imported in the sandbox by the bridge's server
    (:mod:`judges.bridge`), and every use of it crosses a pair of named pipes.
    The hidden tests, their expected values and the report never enter the
    sandbox; the agent's code sees only the arguments of the calls it gets.

Either way the report is written by the judge's pytest to a directory the
sandbox cannot see, so a verdict never rests on anything the agent can write.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judges import pytest_server
from judges.errors import WorkspaceUnjudgeable
from judges.judgement import TestOutcome
from judges.junit import parse_junit
from sandboxes.errors import SandboxError
from sandboxes.interface import ExecResult, Sandbox

if TYPE_CHECKING:
    from judges.final_state import FinalState

BRIDGE_SOURCE = Path(__file__).with_name("bridge.py")
PLUGIN_SOURCE = Path(__file__).with_name("bridge_plugin.py")
_BOOTSTRAP = """
import importlib.util, json, sys
sys.path += json.loads(sys.argv[1])
mod = None
if sys.argv[2]:
    for name, path in (("trajlake_bridge", sys.argv[2]), ("trajlake_bridge_plugin", sys.argv[3])):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
import pytest
raise SystemExit(pytest.main(sys.argv[4:], plugins=[mod] if mod else []))
"""
"""Starts the judge's pytest: ``-I -S`` (no site hooks: the interpreter's own packages are put on
the path by hand, so no ``.pth`` file runs), the bridge's plugin loaded by path, nothing else of
trajlake imported."""


def _site_paths() -> list[str]:
    import sysconfig

    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


NO_BYTECODE = ("-B", "-X", "pycache_prefix=/dev/null/none")
"""Interpreter options for running the agent's code from source only (the ``sandbox`` runner): no
``__pycache__`` is read (a ``.pyc`` there that claims its source's size and time but holds other code
would run instead of the source the judge reads); no cache can exist under ``/dev/null``. The bridge's
server does it more cheaply, for the workspace alone (:func:`judges.bridge.source_only_imports`)."""


@dataclass
class HostRun:
    """What one run of the hidden tests on the host gave."""

    outcomes: list[TestOutcome] = field(default_factory=list)
    exit_code: int | None = None
    """pytest's exit status (``None``: it was killed at the timeout)."""
    timed_out: bool = False
    duration_s: float = 0.0
    output: str = ""
    """The tail of pytest's console output."""
    report_ok: bool = False
    """pytest wrote a readable JUnit report."""
    bridge: dict[str, Any] | None = None
    """``bridge`` mode: what the judge's side saw (connected, broken and why, requests)."""
    server: ExecResult | None = None
    """``bridge`` mode: how the server in the sandbox ended."""


def agent_modules(initial: Path, target: str) -> list[str]:
    """Top-level names the agent's workspace provides: its packages and modules, tests aside."""
    names = []
    if initial.is_dir():
        for p in sorted(initial.iterdir()):
            if p.name.startswith(".") or p.name == target:
                continue
            if p.is_dir() and (p / "__init__.py").is_file() and p.name not in ("tests", "test"):
                names.append(p.name)
            elif p.suffix == ".py" and p.is_file() and not p.name.startswith("test"):
                names.append(p.stem)
    return names


@dataclass
class _PytestRun:
    """One run of the judge's pytest: its arguments, and the bridge's plugin where used."""

    args: list[str]
    plugins: list[tuple[str, str]]

    def argv(self) -> list[str]:
        """A fresh interpreter's command line for the same run (the fallback)."""
        paths = [p for _, p in self.plugins] or ["", ""]
        return [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, json.dumps(_site_paths()), *paths, *self.args]


def _pytest_run(hidden: Path, target: str, report: Path, extra: list[str], plugin: bool) -> _PytestRun:
    plugins = [("trajlake_bridge", str(BRIDGE_SOURCE)), ("trajlake_bridge_plugin", str(PLUGIN_SOURCE))]
    args = ["-q", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(hidden),
            f"--junitxml={report}", "-o", "junit_family=xunit1"]  # fmt: skip
    return _PytestRun([*args, *extra, str(hidden / target)], plugins if plugin else [])


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
    }


def _run_pytest(run: _PytestRun, cwd: Path, env: dict[str, str], timeout: float, out: HostRun) -> None:
    start = time.monotonic()
    server = pytest_server.shared(_site_paths())
    forked = None
    if server is not None:
        console = Path(env["HOME"]) / "console.txt"
        forked = server.run(run.args, cwd=cwd, env=env, output=console, plugins=run.plugins, timeout=timeout)
    if forked is not None:
        out.timed_out, out.exit_code, out.output = forked.timed_out, forked.exit_code, forked.output
    else:
        with subprocess.Popen(
            run.argv(), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        ) as proc:  # fmt: skip
            try:
                text, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                text, _ = proc.communicate()
                out.timed_out = True
            out.exit_code = None if out.timed_out else proc.returncode
        out.output = text.decode("utf-8", "replace")[-3000:]
    out.duration_s = time.monotonic() - start


def _read_report(report: Path, out: HostRun) -> None:
    try:
        out.outcomes = parse_junit(report.read_text())
        out.report_ok = True
    except (OSError, ValueError):
        out.outcomes = []


def _write_hidden(
    root: Path, target: str, files: dict[str, bytes], extra: Callable[[Path], None] | None
) -> Path:
    hidden = root / "hidden"
    (hidden / target).mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        p = hidden / target / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    if extra is not None:
        extra(hidden / target)  # the generated check, beside the hidden tests
    return hidden


def run_outputs(state: FinalState, hidden_files: dict[str, bytes], target: str, *, timeout: float,
                extra_args: list[str], extra: Callable[[Path], None] | None = None) -> HostRun:  # fmt: skip
    """The ``outputs`` mode (see the module docstring): the hidden tests over the judged tree, on the host.

    Args:
        state: the judged tree (:func:`judges.final_state.capture`), written to a fresh directory.
        hidden_files: the hidden tests, by path relative to their directory.
        target: the hidden tests' directory name.
        timeout: wall-clock limit of the test run.
        extra_args: more pytest arguments.
        extra: writes more tests beside the hidden ones (the generated check).
    """
    out = HostRun()
    root = Path(tempfile.mkdtemp(prefix="trajlake-judge-"))
    try:
        ws = state.materialise(root / "workspace")
        hidden = _write_hidden(root, target, hidden_files, extra)
        report = root / "report.xml"
        run = _pytest_run(hidden, target, report, extra_args, plugin=False)
        _run_pytest(run, ws, _env(root, {}), timeout, out)
        _read_report(report, out)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def order_seed(state: str) -> str:
    """The seed of the hidden tests' order for one final state: keyed by this host's judge secret.

    The same state gets the same order (verdicts are reproducible); another state, or another
    host, gets another one, and without the secret (never in a sandbox) nobody can compute it.
    """
    import hashlib
    import hmac

    return hmac.new(judge_secret(), state.encode(), hashlib.sha256).hexdigest()[:16]


_secret_override: bytes | None = None
_override_lock = threading.Lock()


@contextlib.contextmanager
def use_secret(key: bytes) -> Iterator[None]:
    """Judge with ``key`` instead of this host's secret while the block runs (the whole process).

    For tests and measurements that need two hosts' worth of secrets on one machine; never while
    rewards that are trained on are judged.
    """
    global _secret_override
    with _override_lock:
        before, _secret_override = _secret_override, key
    try:
        yield
    finally:
        with _override_lock:
            _secret_override = before


def judge_secret() -> bytes:
    """This host's judge secret: it keys the hidden tests' order and the generated checks' questions.

    Kept in ``~/.cache/trajlake/judge-order.key`` (made on first use), never in a sandbox.
    """
    if _secret_override is not None:
        return _secret_override
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trajlake"
    path = base / "judge-order.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        base.mkdir(parents=True, exist_ok=True)
        key = os.urandom(32)
        tmp = base / f".judge-order.key.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        try:
            os.link(tmp, path)  # the first writer wins; everyone reads its key
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        return path.read_bytes()


def run_bridge(sandbox: Sandbox, hidden_files: dict[str, bytes], target: str, modules: list[str], *,
               timeout: float, extra_args: list[str], order: str | None = None,
               extra: Callable[[Path], None] | None = None) -> HostRun:  # fmt: skip
    """The ``bridge`` mode (see the module docstring); ``order`` seeds the tests' order.

    The sandbox must hold the judged tree (:func:`judges.final_state.capture` resets it so): the
    server imports the agent's package from it and from nothing else of the agent's.
    """
    out = HostRun()
    root = Path(tempfile.mkdtemp(prefix="trajlake-judge-"))
    try:
        chan = sandbox.open_fifo_pair(f".trajlake-bridge-{uuid.uuid4().hex}")
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # the agent filled its workspace (bytes or entries)
            why = "the workspace is full: the judge cannot open its channel in it"
            raise WorkspaceUnjudgeable(why) from exc
        raise
    server: dict[str, Any] = {}

    def serve() -> None:
        try:
            server["result"] = sandbox.exec(
                # no site hooks, no .pth, no user site (-I -S): the server fixes its own path, and imports
                # the workspace from source only (bridge.serve_fifos, bridge.source_only_imports)
                ["python3", "-I", "-S", "-B", "-c", BRIDGE_SOURCE.read_text(), chan.sandbox_dir],
                timeout=timeout + 3,  # ends with the judge's pytest (a looping agent keeps it no longer)
            )
        except SandboxError as exc:
            server["error"] = exc

    thread = threading.Thread(target=serve, name="bridge-server", daemon=True)
    try:
        hidden = _write_hidden(root, target, hidden_files, extra)
        report = root / "report.xml"
        status = root / "bridge.json"
        env = _env(root, {
            "TRAJLAKE_BRIDGE_TO": str(chan.host_to), "TRAJLAKE_BRIDGE_FROM": str(chan.host_from),
            "TRAJLAKE_BRIDGE_MODULES": ",".join(modules), "TRAJLAKE_BRIDGE_STATUS": str(status),
            "TRAJLAKE_BRIDGE_CONNECT_S": str(min(30.0, timeout)),
            **({"TRAJLAKE_BRIDGE_ORDER": order} if order else {}),
        })  # fmt: skip
        thread.start()
        run = _pytest_run(hidden, target, report, extra_args, plugin=True)
        _run_pytest(run, hidden, env, timeout, out)
        _read_report(report, out)
        try:
            out.bridge = json.loads(status.read_text())
        except (OSError, ValueError):
            out.bridge = None
        chan.remove()  # a server still waiting to connect gets EOF-free errors, not a hang
        thread.join(timeout + 15)
        if "error" in server:
            raise server["error"]
        out.server = server.get("result")
        return out
    finally:
        chan.remove()
        shutil.rmtree(root, ignore_errors=True)
