"""The judge's pytest, started once and forked for each run of the hidden tests.

Importing pytest costs about as much as running a small task's hidden tests, and
the host-side judge would pay it on every judgement. So one long-lived process
(started the way a single run is: ``python -I -S``, the interpreter's own
packages put on the path by hand, nothing of trajlake and nothing of any
workspace imported) imports pytest and its built-in plugins, and forks a child
per run. The child moves to the run's directory, takes the run's environment,
sends its console to a file of the run, loads the bridge's plugin by path where
asked, calls ``pytest.main`` and exits with its status. Nothing of the agent
ever runs in this process or its children: agent code runs only in the sandbox
(``bridge``) or not at all (``outputs``), so a child cannot leave anything
behind for the next one, and each child is a fresh copy of the clean server.

Protocol (one JSON object per line): the client writes ``{"id", "args", "cwd",
"env", "output", "plugins"}``; the server answers ``{"id", "pid"}`` once the
child exists, and ``{"id", "status"}`` (the exit code, or ``-signal``) when it
ends. Runs are concurrent; the client kills a child at its deadline by its
process group. If the server cannot start or dies, each run falls back to a
fresh interpreter (the same argv as before this server existed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

_SERVER = r"""
import importlib, importlib.util, json, os, select, signal, sys
sys.path += json.loads(sys.argv[1])
import pytest
from _pytest.config import default_plugins
for _name in default_plugins:
    try:
        importlib.import_module("_pytest." + _name)
    except ImportError:
        pass

wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *a: None)
requests = os.fdopen(0, "rb", buffering=0)
replies = os.fdopen(1, "wb", buffering=0)
running = {}
pending = b""


def reply(obj):
    replies.write((json.dumps(obj) + "\n").encode())


def child(req):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    out = os.open(req["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    for fd in (wake_r, wake_w, out, null):
        os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    mod = None
    for name, path in req["plugins"]:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    code = pytest.main(req["args"], plugins=[mod] if mod else [])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


while True:
    ready, _, _ = select.select([requests, wake_r], [], [])
    if wake_r in ready:
        try:
            os.read(wake_r, 4096)
        except BlockingIOError:
            pass
    if requests in ready:
        chunk = requests.read(1 << 16)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            req = json.loads(line)
            pid = os.fork()
            if pid == 0:
                try:
                    child(req)
                finally:
                    os._exit(70)
            running[pid] = req["id"]
            reply({"id": req["id"], "pid": pid})
    while running:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        rid = running.pop(pid, None)
        if rid is not None:
            reply({"id": rid, "status": os.waitstatus_to_exitcode(status)})
"""


@dataclass
class RunResult:
    """How one forked run ended."""

    exit_code: int | None
    """pytest's exit status (negative: killed by that signal; ``None``: killed at the deadline)."""
    timed_out: bool
    output: str


class _Call:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        """The server process the run was sent to (only its death fails the run)."""
        self.pid: int | None = None
        self.status: int | None = None
        self.started = threading.Event()
        self.done = threading.Event()


class PytestServer:
    """Client of one server process; thread-safe, started lazily, restarted if it dies."""

    def __init__(self, site_paths: list[str]) -> None:
        self._site_paths = site_paths
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._calls: dict[int, _Call] = {}
        self._next = 0

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _SERVER, json.dumps(self._site_paths)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "LANG": "C.UTF-8",
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            },  # fmt: skip
            start_new_session=True,
        )
        self._proc = proc
        reader = threading.Thread(target=self._read, args=(proc,), name="pytest-server", daemon=True)
        reader.start()
        return proc

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                call = self._calls.get(msg.get("id"))
            if call is None:
                continue
            if "pid" in msg:
                call.pid = int(msg["pid"])
                call.started.set()
            elif "status" in msg:
                call.status = int(msg["status"])
                call.done.set()
        # the server is gone: every run still waiting on it learns it (not the runs a new server
        # took meanwhile: this reader may see the end of its server's output late)
        with self._lock:
            calls = [c for c in self._calls.values() if c.proc is proc]
        for call in calls:
            call.started.set()
            call.done.set()

    def run(
        self,
        args: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        output: Path,
        plugins: list[tuple[str, str]],
        timeout: float,
    ) -> RunResult | None:
        """One run of pytest; ``None`` if the server could not take it (the caller falls back)."""
        call = _Call()
        with self._lock:
            try:
                proc = self._ensure()
            except OSError:
                return None
            self._next += 1
            rid = self._next
            call.proc = proc
            self._calls[rid] = call
            line = json.dumps({"id": rid, "args": args, "cwd": str(cwd), "env": env,
                               "output": str(output), "plugins": plugins}) + "\n"  # fmt: skip
            try:
                assert proc.stdin is not None
                proc.stdin.write(line.encode())
                proc.stdin.flush()
            except (OSError, ValueError):
                self._calls.pop(rid, None)
                return None
        try:
            deadline = time.monotonic() + timeout
            if not call.started.wait(30) or call.pid is None:
                return None
            timed_out = not call.done.wait(max(0.0, deadline - time.monotonic()))
            if timed_out:
                _kill_group(call.pid)
                call.done.wait(10)
            elif call.status is None:
                return None  # the server died under the run: run it again without it
            text = _read_tail(output)
            return RunResult(None if timed_out else call.status, timed_out, text)
        finally:
            with self._lock:
                self._calls.pop(rid, None)

    def close(self) -> None:
        """Stop the server (children already forked finish on their own)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            _close_quietly(proc.stdin)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _kill_group(pid: int) -> None:
    """The run's whole group (the child made it), and the child itself if it had not yet."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _read_tail(path: Path, limit: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit * 4))
            return f.read().decode("utf-8", "replace")[-limit:]
    except OSError:
        return ""


def _close_quietly(stream: IO[Any] | None) -> None:
    if stream is not None:
        try:
            stream.close()
        except OSError:
            pass


_shared: PytestServer | None = None
_shared_lock = threading.Lock()


def shared(site_paths: list[str]) -> PytestServer | None:
    """The process's server (``TRAJLAKE_JUDGE_FORK=0`` turns it off: every run a fresh interpreter)."""
    global _shared
    if os.environ.get("TRAJLAKE_JUDGE_FORK", "1") == "0":
        return None
    with _shared_lock:
        if _shared is None:
            _shared = PytestServer(site_paths)
            import atexit

            atexit.register(_shared.close)
        return _shared
