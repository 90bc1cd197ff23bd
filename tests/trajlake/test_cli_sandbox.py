"""`trajlake sandbox ...` run as a user would, in a subprocess, against the real backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxes import SandboxBackend, SandboxConfig

TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))


def run(cfg: SandboxConfig, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TRAJLAKE_SANDBOX_RUNTIME_DIR": str(cfg.runtime_dir),
        "TRAJLAKE_IMAGE_STORE": str(cfg.image_store),
        "COLUMNS": "200",
    }
    return subprocess.run([TRAJLAKE, *args], env=env, capture_output=True, text=True, timeout=300)


def test_run_prints_a_json_result(backend: SandboxBackend, sandbox_config: SandboxConfig) -> None:
    p = run(
        sandbox_config,
        "sandbox",
        "run",
        "--backend",
        backend.name,
        "--json",
        "--",
        "python3",
        "-c",
        "print(1)",
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["exit_code"] == 0 and out["stdout"].strip() == "1"
    assert out["timed_out"] is False and out["duration_s"] > 0 and out["stderr"] == ""
    assert out["backend"] == backend.name
    if backend.name == "docker":
        assert out["image"].startswith("sha256:")


def test_run_reports_containment(local_backend: SandboxBackend, sandbox_config: SandboxConfig) -> None:
    p = run(
        sandbox_config,
        "sandbox",
        "run",
        "-b",
        "local",
        "--json",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        "sleep 30",
    )
    out = json.loads(p.stdout)
    assert out["timed_out"] is True and out["exit_code"] == 137 and out["duration_s"] < 10
    p = run(sandbox_config, "sandbox", "run", "-b", "local", "--json", "--memory", "64", "--",
            "python3", "-c", "x = bytearray(512 << 20)")  # fmt: skip
    out = json.loads(p.stdout)
    assert out["oom_killed"] is True and out["exit_code"] != 0


def test_run_without_json_mirrors_the_exit_code(
    local_backend: SandboxBackend, sandbox_config: SandboxConfig
) -> None:
    p = run(
        sandbox_config, "sandbox", "run", "-b", "local", "--", "sh", "-c", "echo out; echo err >&2; exit 7"
    )
    assert p.returncode == 7 and p.stdout == "out\n" and "err" in p.stderr


def test_run_errors_are_clear(sandbox_config: SandboxConfig) -> None:
    p = run(sandbox_config, "sandbox", "run", "-b", "local", "--json")
    assert p.returncode == 2 and "no command" in p.stderr
    p = run(sandbox_config, "sandbox", "run", "-b", "nope", "--", "true")
    assert p.returncode == 2 and "'nope' is not one of 'local', 'docker'" in p.stderr


def test_selftest_prints_a_table(local_backend: SandboxBackend, sandbox_config: SandboxConfig) -> None:
    p = run(
        sandbox_config, "sandbox", "selftest", "-b", "local", "--check", "network", "--check", "privileges"
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "network" in p.stdout and "privileges" in p.stdout and "all 2 checks passed" in p.stdout


def test_images_lists_the_base_image(base_image: str, sandbox_config: SandboxConfig) -> None:
    p = run(sandbox_config, "sandbox", "images")
    assert p.returncode == 0 and base_image in p.stdout


@pytest.mark.parametrize("check", ["bogus"])
def test_selftest_refuses_unknown_checks(sandbox_config: SandboxConfig, check: str) -> None:
    p = run(sandbox_config, "sandbox", "selftest", "-b", "local", "--check", check)
    assert p.returncode == 2 and "unknown checks" in p.stderr
