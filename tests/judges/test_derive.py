"""``judges.derive``: a draft's reference reaches the fix from the agent's tree, whatever the host's git."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from judges.derive import CaseFailure, derive_task, derived_id
from judges.final_state import FinalState, host_tree
from judges.tasks import load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _clean_git(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_CEILING_DIRECTORIES=str(cwd.parent))
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env, check=False)


def _failure(**kw: object) -> CaseFailure:
    base: dict[str, object] = {
        "case": "c1", "category": "test_failure", "signature": "test_failure: x", "message": None,
        "observation": "seen", "episode_id": "01a2-b3c4-d5e6f7a8b9c0", "failed_at_judgement": True,
    }  # fmt: skip
    base.update(kw)
    return CaseFailure(**base)  # type: ignore[arg-type]


@pytest.fixture
def source(tmp_path: Path):  # type: ignore[no-untyped-def]
    shutil.copytree(TASKS / "pyfix" / "pyfix-004", tmp_path / "src" / "pyfix" / "pyfix-004")
    shutil.copy(TASKS / "pyfix" / "family.yaml", tmp_path / "src" / "pyfix" / "family.yaml")
    return load_task(tmp_path / "src" / "pyfix" / "pyfix-004")


def test_the_reference_reaches_the_fix_from_a_hostile_tree_on_a_host_with_hooks(
    source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    # the host's git: a global hook that leaves a mark, an external diff tool, signing on, and a GIT_DIR
    home = tmp_path / "home"
    hooks = home / "hooks"
    hooks.mkdir(parents=True)
    mark = tmp_path / "hook-ran"
    (hooks / "pre-commit").write_text(f"#!/bin/sh\ntouch {mark}\n")
    (hooks / "pre-commit").chmod(0o755)
    (home / ".gitconfig").write_text(
        f"[core]\n\thooksPath = {hooks}\n[diff]\n\texternal = /bin/false\n[commit]\n\tgpgsign = true\n"
    )
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True, env={**os.environ, "HOME": str(tmp_path)})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    # the agent's tree: files that change what git records, a CRLF file, an edit, a new file
    start = host_tree(source.initial_dir)
    files = dict(start.files)
    first = sorted(p for p in files if p.endswith(".py"))[0]
    files[first] = files[first] + b"\n# touched by the agent\n"
    files.update({
        ".gitattributes": b"* ident\n*.md working-tree-encoding=UTF-16\n*.py -diff\n",
        ".gitignore": b"*\n",
        "NOTES.md": b"$Id$ crlf\r\nline\r\n",
        "junk/x.bin": bytes(range(256)),
    })  # fmt: skip
    state = FinalState(files=files, dirs=frozenset(start.dirs | {"junk"}))
    draft = derive_task(source, _failure(), state, tmp_path / "out")
    assert draft.from_episode_state and not mark.exists()
    assert (
        _clean_git(other, "--git-dir", str(other / ".git"), "rev-parse", "HEAD").returncode != 0
    )  # no commit there
    # what admission does in the sandbox: the draft's files, then its reference with git apply
    ws = tmp_path / "ws"
    shutil.copytree(draft.task.initial_dir, ws)
    assert (ws / "NOTES.md").read_bytes() == b"$Id$ crlf\r\nline\r\n"
    applied = _clean_git(ws, "apply", "--whitespace=nowarn", "-", stdin=draft.task.reference_bytes())
    assert applied.returncode == 0, applied.stderr
    fixed = tmp_path / "fixed"
    shutil.copytree(source.initial_dir, fixed)
    assert _clean_git(fixed, "apply", "-", stdin=source.reference_bytes()).returncode == 0
    got, want = host_tree(ws), host_tree(fixed)
    assert {p: d for p, d in got.files.items()} == {p: d for p, d in want.files.items()}
    assert draft.task.spec.version == f"{source.spec.version}.d5e6f7a8b9c0"
    assert (
        f"--- a/{first}".encode() in draft.task.reference_bytes()
    )  # text stays text for the person reading it


def test_ids_keep_the_case_and_a_blank_message_is_not_quoted(source, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    long = "a" * 128
    assert derived_id(long, "case-x").endswith(".case-x") and len(derived_id(long, "case-x")) <= 128
    draft = derive_task(source, _failure(message="  \n ", failed_at_judgement=False), None, tmp_path / "out")
    assert not draft.from_episode_state and "before its judgement" in (draft.why_not or "")
    assert "it failed with: test_failure: x." in draft.task.spec.instruction
    with pytest.raises(Exception, match="exists already"):
        derive_task(source, _failure(), None, tmp_path / "out")
