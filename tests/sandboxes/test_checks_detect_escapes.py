"""The isolation checks fail on a sandbox that does not isolate: they can fail.

``HostSandbox`` runs commands directly on the host in a plain directory, with
no namespaces and no limits. Every isolation check must report it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from sandboxes import ExecResult, Sandbox, SandboxBackend, SandboxSpec
from sandboxes.conformance import run_check
from sandboxes.workspace_io import copy_tree


class HostSandbox(Sandbox):
    backend = "host-unisolated"

    def __init__(self, spec: SandboxSpec) -> None:
        super().__init__("host", spec, None)
        self.root = Path(tempfile.mkdtemp(prefix="unisolated-"))
        if spec.workspace:
            copy_tree(spec.workspace, self.root)

    def _exec(self, argv, *, timeout, env, stdin, cwd):  # type: ignore[no-untyped-def]
        cwd = cwd.replace("/workspace", str(self.root), 1)
        start = time.monotonic()
        try:
            p = subprocess.run(
                argv, input=stdin, capture_output=True, timeout=timeout, cwd=cwd, env=env or None
            )
            return ExecResult(p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - start)
        except subprocess.TimeoutExpired:
            return ExecResult(137, "", "", time.monotonic() - start, timed_out=True)

    def _read_file(self, rel, max_bytes):  # type: ignore[no-untyped-def]
        return (self.root / rel).read_bytes()

    def _write_file(self, rel, data, mode):  # type: ignore[no-untyped-def]
        (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.root / rel).write_bytes(data)

    def _workspace_root(self) -> Path:
        return self.root

    def _quiesce(self) -> None:
        pass

    def _snapshot(self):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def _restore(self, ref):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def _reset(self, workspace):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def _check_alive(self) -> None:
        pass

    def _close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class HostBackend(SandboxBackend):
    name = "host-unisolated"

    def unavailable_reason(self) -> str | None:
        return None

    def create(self, spec: SandboxSpec, *, sandbox_id: str | None = None) -> Sandbox:
        return HostSandbox(spec)


@pytest.mark.parametrize("check", ["network", "network_observed", "host_files", "file_io"])
def test_isolation_checks_fail_without_isolation(check: str) -> None:
    result = run_check(HostBackend(), check)
    assert not result.passed, f"{check} passed on an unisolated host sandbox: {result.detail}"


def test_privileges_check_fails_for_root() -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("the unisolated sandbox is only privileged when the tests run as root")
    result = run_check(HostBackend(), "privileges")
    assert not result.passed and "uid is not 0" in result.detail
