"""The environment state cache: a cached initial state is the cold path's, file for file (real sandboxes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from judges.final_state import read_archive
from judges.state_cache import StateCache
from judges.tasks import load_task
from rollouts.runner import ROLLOUT_SPEC
from sandboxes import SandboxBackend, SandboxPool

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _task(root: Path, setup: list[str]) -> object:
    shutil.copy(TASKS / "pyfix" / "family.yaml", root / "family.yaml")
    shutil.copytree(TASKS / "pyfix" / "pyfix-004", root / "pyfix-004")
    spec = yaml.safe_load((root / "pyfix-004" / "task.yaml").read_text())
    spec.setdefault("initial_state", {})["setup"] = setup
    (root / "pyfix-004" / "task.yaml").write_text(yaml.safe_dump(spec))
    return load_task(root / "pyfix-004")


@pytest.mark.parametrize("backend_name", ["local_backend", "docker_backend"])
def test_a_cache_hit_is_the_cold_state_and_runs_no_setup(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path, base_image: str
) -> None:
    backend: SandboxBackend = request.getfixturevalue(backend_name)
    (tmp_path / "pyfix").mkdir()
    # a setup that builds files (one executable, one nested) and counts its runs outside the sandbox's view
    task = _task(tmp_path / "pyfix", [
        "mkdir -p build/deep && python3 -c \"print('generated')\" > build/deep/gen.txt",
        "printf '#!/bin/sh\\necho hi\\n' > build/run.sh && chmod +x build/run.sh",
        "echo ran >> setup-runs.txt",
        "echo s > build/secret && chmod 600 build/secret",
    ])  # fmt: skip
    cache = StateCache(tmp_path / "cache")
    with SandboxPool(backend, ROLLOUT_SPEC.with_(image=base_image), max_size=2) as pool:

        def state(use_cache: bool) -> tuple[str, str, str]:
            with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:  # type: ignore[attr-defined]
                if use_cache:
                    how = cache.prepare(task, sb)  # type: ignore[arg-type]
                else:
                    task.prepare(sb)  # type: ignore[attr-defined]
                    how = "cold"
                runs = sb.exec(
                    "cat setup-runs.txt; ./build/run.sh; stat -c %a build/secret", timeout=30
                ).stdout
                digest = read_archive(sb.export_workspace()).digest
                if use_cache:
                    assert cache.digest(task, sb.image_digest) == digest  # type: ignore[arg-type]
                return how, digest, runs

        cold = state(False)
        miss = state(True)
        hit = state(True)
        again = state(True)
    assert (cold[0], miss[0], hit[0], again[0]) == ("cold", "miss", "hit", "hit")
    assert cold[1] == miss[1] == hit[1] == again[1]  # the same file tree, modes included
    # the setup ran once, when the state was made (the hit ran none); modes are the cold path's
    assert cold[2] == miss[2] == hit[2] == again[2] == "ran\nhi\n600\n"
    assert (cache.hits, cache.misses) == (2, 1)
    assert [p.name for p in (tmp_path / "cache").iterdir()] and all(
        (p / "meta.json").is_file() for p in (tmp_path / "cache").iterdir()
    )


def test_a_setup_that_writes_outside_the_workspace_is_not_cached(
    local_backend: SandboxBackend, tmp_path: Path, base_image: str
) -> None:
    (tmp_path / "pyfix").mkdir()
    task = _task(tmp_path / "pyfix", ["echo state > /tmp/outside.txt"])
    no_setup = load_task(TASKS / "pyfix" / "pyfix-004")
    cache = StateCache(tmp_path / "cache")
    with SandboxPool(local_backend, ROLLOUT_SPEC.with_(image=base_image), max_size=1) as pool:
        for _ in range(2):
            with pool.lease(image=base_image, workspace=task.initial_dir) as sb:  # type: ignore[attr-defined]
                assert cache.prepare(task, sb) == "uncacheable"  # type: ignore[arg-type]
        with pool.lease(image=base_image, workspace=no_setup.initial_dir) as sb:
            assert cache.prepare(no_setup, sb) == "no_setup"  # its files are its state: nothing to cache
    assert cache.uncacheable == 2 and not (tmp_path / "cache").exists()
