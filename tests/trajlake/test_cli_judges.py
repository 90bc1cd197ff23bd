"""`trajlake judges verify` and `trajlake tasks admit`, run as a user would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from sandboxes import SandboxBackend, SandboxConfig

TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))
REPO = Path(__file__).resolve().parents[2]


def run(
    cfg: SandboxConfig, home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **(env or {}),
        "TRAJLAKE_HOME": str(home),
        "TRAJLAKE_SANDBOX_RUNTIME_DIR": str(cfg.runtime_dir),
        "TRAJLAKE_IMAGE_STORE": str(cfg.image_store),
        "COLUMNS": "220",
    }
    return subprocess.run([TRAJLAKE, *args], env=env, capture_output=True, text=True, timeout=900, cwd=REPO)


def test_verify_passes_on_main_and_fails_when_behaviour_changes(
    local_backend: SandboxBackend, base_image: str, sandbox_config: SandboxConfig, tmp_path: Path
) -> None:
    golden = REPO / "judges" / "golden" / "static.yaml"
    p = run(sandbox_config, tmp_path, "judges", "verify", str(golden), "--json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "golden cases unchanged" in p.stdout
    assert all(c["ok"] for c in json.loads((tmp_path / "r.json").read_text())["cases"])
    # the same trajectories against a judge that now behaves differently (only changed files)
    changed = tmp_path / "static.yaml"
    changed.write_text(
        golden.read_text().replace(
            "judge: {name: static}", "judge: {name: static, config: {changed_only: true}}", 1
        )
    )
    p = run(sandbox_config, tmp_path, "judges", "verify", str(changed))
    assert p.returncode == 1
    assert "changed static/syntax-error-in-one-of-three-files: score 0.6667 -> 0.0000" in p.stderr


def _shipped_tasks(into: Path, *, everything: bool) -> tuple[Path, list[str]]:
    """The shipped task families, or a copy of a seeded sample of each (wordplay-001 always, the
    task without a generated check); returns the root to admit and the task ids it holds."""
    import random

    families = ("pyfix", "datawrangle", "wordplay")
    ids = {
        f: sorted(d.name for d in (REPO / "tasks" / f).iterdir() if (d / "task.yaml").is_file())
        for f in families
    }
    if everything:
        return REPO / "tasks", sorted(t for f in families for t in ids[f])
    rng = random.Random(24)
    chosen: list[str] = []
    for family in families:
        picked = set(rng.sample(ids[family], 4)) | ({"wordplay-001"} if family == "wordplay" else set())
        (into / family).mkdir(parents=True)
        shutil.copy(REPO / "tasks" / family / "family.yaml", into / family / "family.yaml")
        for task in sorted(picked):
            shutil.copytree(REPO / "tasks" / family / task, into / family / task)
        chosen += picked
    return into, sorted(chosen)


@pytest.mark.kafka
def test_admit_the_shipped_tasks_and_reject_a_broken_copy(
    local_backend: SandboxBackend,
    base_image: str,
    sandbox_config: SandboxConfig,
    tmp_path: Path,
    topics_env: dict[str, str],
) -> None:
    home = tmp_path / "home"
    # The shipped tasks (the demo's reverse family is generated and admitted by the demo itself):
    # a seeded sample of each family here, every one with TRAJLAKE_ADMIT_ALL_TASKS=1 (91 tasks,
    # about four minutes). The results go to the log, and the command folds them into the tasks
    # table (a projection).
    root, expected = _shipped_tasks(
        tmp_path / "shipped", everything=bool(os.environ.get("TRAJLAKE_ADMIT_ALL_TASKS"))
    )
    p = run(sandbox_config, home, "tasks", "admit", str(root), "--runs", "2", env=topics_env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = DeltaTable(str(home / "lake" / "tasks")).to_pyarrow_table().to_pylist()
    assert sorted(r["task_id"] for r in rows) == expected
    assert all(r["admitted"] and r["state_digest"] for r in rows)
    assert {r["family"] for r in rows} == {"pyfix", "datawrangle", "wordplay"}
    # no null-effort state earns more than doing nothing, and every pyfix and datawrangle task asks
    # questions drawn at judge time
    assert all(
        r["null_effort_max"] is not None and r["null_effort_max"] <= r["do_nothing_score"] for r in rows
    )
    assert all(json.loads(r["spec"])["generated"] for r in rows if r["family"] != "wordplay")
    assert "note no generated check" in " ".join(p.stdout.split()) and "wordplay-001" in p.stdout
    # a copy whose reference solution leaves the state untouched is rejected
    broken = tmp_path / "broken" / "pyfix"
    shutil.copytree(REPO / "tasks" / "pyfix" / "pyfix-002", broken / "pyfix-002")
    shutil.copy(REPO / "tasks" / "pyfix" / "family.yaml", broken / "family.yaml")
    (broken / "pyfix-002" / "solution.patch").write_text("")
    p = run(sandbox_config, home, "tasks", "admit", str(broken), env=topics_env)
    assert p.returncode == 1
    assert "passes_reference" in p.stdout
    rows = {r["task_id"]: r for r in DeltaTable(str(home / "lake" / "tasks")).to_pyarrow_table().to_pylist()}
    assert rows["pyfix-002"]["admitted"] is False and rows["pyfix-002"]["reasons"]
    # the table is what the log holds: a replay rebuilds it row for row
    p = run(sandbox_config, home, "replay", "--into", str(tmp_path / "replayed"), env=topics_env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    p = run(
        sandbox_config, home, "lake", "diff", str(home / "lake"), str(tmp_path / "replayed"), env=topics_env
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
