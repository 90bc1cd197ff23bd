"""Task drafts targeted at a failure case: the case's task again, from where its failing episode stopped.

:func:`derive_task` writes a new task directory from a source task and one failing episode of a
curated failure case (``trajlake failures curate``). The draft is the source task's family format,
whole (its merged spec written out, so it needs no ``family.yaml``), with:

- **the initial state the episode left**, where the family allows it: the source starts from a
  directory of files with no setup commands, its reference is a patch, the episode failed at its
  judgement (so the archived final state is the state right before the failing step), and that
  state was archived. Otherwise the source's own initial state (the draft says why);
- **a reference that reaches the fix from there**: the patch from that state to the source's
  initial files with the source's reference applied (made with ``git`` on the host), so
  admission can check it like any task's;
- **an instruction** that says an earlier attempt stopped here and how it failed, then the source's
  (a failed judgement is said as such: what the judge saw names hidden tests, which admission
  refuses in an instruction);
- **the source's hidden tests and generated check**, and a ``DRAFT.md`` naming the tests the
  failure named and what the episode saw: the tests are a draft a person edits;
- ``lineage``: the case, the source task and version, the episode; its id ``<source id>.<case>``
  and its version ``<source version>.<12 hex of the episode id>`` (a draft from another episode
  of the case is another version, never a replacement of an admitted one).

The agent's tree is diffed with a ``git`` that reads no configuration, hook, attribute or
repository of the host's (see :func:`_git_env`), with every file forced in, so what the patch
holds is the two trees and nothing else.

Nothing here reads the lake or runs a sandbox: the caller finds the case, the episode's archive
and the source task, and admission decides whether the draft joins the pool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from judges.errors import TaskSpecError
from judges.final_state import FinalState
from judges.tasks import SPEC_FILE, Task, TaskLineage, load_task

DRAFT_FILE = "DRAFT.md"
DERIVED_PATCH = "solution_from_case.patch"
OBSERVATION_CHARS = 4000
"""What ``DRAFT.md`` quotes of the failing step's observation (its tail)."""


@dataclass(frozen=True)
class CaseFailure:
    """What a derived task is targeted at: a case and one of its failing episodes."""

    case: str
    """The case's name (``failure_cases.case_id``)."""
    category: str
    signature: str
    message: str | None
    observation: str | None
    episode_id: str
    failed_at_judgement: bool
    """The case's judge version judged the episode (so its archived final state is the state it
    judged: the state right before the failing judgement), whatever step the failure points at."""


@dataclass(frozen=True)
class Draft:
    """A task directory written by :func:`derive_task`."""

    task: Task
    from_episode_state: bool
    """It starts from the episode's final state (else from the source's initial state)."""
    why_not: str | None
    """Why it does not start from the episode's state (``None`` when it does)."""


def derived_id(source_id: str, case: str) -> str:
    """The draft's task id: the source's (shortened to fit 128 characters), then the case's name."""
    head = source_id[: 127 - len(case)].rstrip("._-") or "t"
    return f"{head}.{case}"


def _state_blocker(source: Task, failure: CaseFailure, state: FinalState | None) -> str | None:
    spec = source.spec
    if spec.initial_state.setup:
        return "the family runs setup commands after its files are in (its state is not files alone)"
    if spec.reference_solution.patch is None:
        return "the source's reference is a script, so the fix cannot be reached from another state"
    if not failure.failed_at_judgement:
        return "the episode failed before its judgement, and only its final state was archived"
    if state is None:
        return "the episode's final state was not archived (or is gone from the blob store)"
    return None


_ATTRIBUTES = b"* -text -eol -ident -filter -working-tree-encoding !diff -export-subst\n"
"""``.git/info/attributes`` of the diffing repository: it outranks any ``.gitattributes`` the agent
left, so no line-ending, ident, filter or encoding conversion changes what is recorded, and text stays
text in the patch (`!diff`: git's own binary detection, whatever the agent's attributes say)."""


def _git_env(cwd: Path) -> dict[str, str]:
    """An environment in which git reads no configuration, hooks or repository but the one made here.

    The files are the agent's: the user's global configuration (hooks, a diff tool, signing,
    excludes) must not run on them or change what the patch holds, and a ``GIT_DIR`` or a
    repository above the temporary directory must not be used.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_ATTR_NOSYSTEM="1",
               GIT_CEILING_DIRECTORIES=str(cwd.parent), GIT_TERMINAL_PROMPT="0")  # fmt: skip
    return env


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    settings = ("user.name=trajlake", "user.email=trajlake@localhost", "core.autocrlf=false",
                f"core.hooksPath={os.devnull}", "commit.gpgsign=false", f"core.excludesFile={os.devnull}",
                f"core.attributesFile={os.devnull}", "core.fsmonitor=false")  # fmt: skip
    try:
        proc = subprocess.run(
            ["git", *(x for kv in settings for x in ("-c", kv)), *args],
            cwd=cwd, input=stdin, capture_output=True, check=False, env=_git_env(cwd), timeout=600,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TaskSpecError(f"git {args[0]} did not run: {exc}", str(cwd)) from exc
    if proc.returncode != 0:
        raise TaskSpecError(
            f"git {args[0]} failed: {proc.stderr.decode(errors='replace').strip()[:300]}", str(cwd)
        )
    return proc.stdout


def _patch_between(start: Path, goal: Path, work: Path) -> bytes:
    """A ``git apply`` patch that turns the tree ``start`` into the tree ``goal``."""
    repo = work / "diff"
    shutil.copytree(start, repo)
    _git(repo, "init", "-q", "--template=")
    (repo / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_bytes(_ATTRIBUTES)
    _git(repo, "add", "-A", "--force")  # (the agent's .gitignore hides nothing)
    _git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", "start")
    for child in repo.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    shutil.copytree(goal, repo, dirs_exist_ok=True)
    _git(repo, "add", "-A", "--force")
    return _git(repo, "diff", "--cached", "--binary", "--full-index", "--no-ext-diff", "--no-textconv")


def derive_task(source: Task, failure: CaseFailure, state: FinalState | None, out: Path) -> Draft:
    """Write the draft of ``source`` targeted at ``failure`` under ``out``; the loaded draft.

    Raises:
        TaskSpecError: the draft's directory exists already, the source's reference does not
            apply to its own initial state, or the episode's state already is the fix.
    """
    spec = source.spec
    new_id = derived_id(spec.id, failure.case)
    dest = out / new_id
    if dest.exists():
        raise TaskSpecError(f"{dest} exists already; remove it or give another --out", str(dest))
    blocker = _state_blocker(source, failure, state)
    raw: dict[str, Any] = spec.model_dump(mode="json")
    with tempfile.TemporaryDirectory(prefix="trajlake-derive-") as tmp:
        work = Path(tmp)
        shutil.copytree(
            source.root, work / "task", ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
        )
        draft = work / "task"
        if blocker is None:
            assert state is not None and spec.reference_solution.patch is not None
            fixed = work / "fixed"
            shutil.copytree(source.initial_dir, fixed)
            _git(fixed, "apply", "--whitespace=nowarn", "-", stdin=source.reference_bytes())
            start = state.materialise(work / "start")
            patch = _patch_between(start, fixed, work)
            if not patch.strip():
                raise TaskSpecError(
                    f"episode {failure.episode_id} left {spec.id}'s workspace as its reference does: "
                    "nothing to derive",
                    str(source.root),
                )
            files = draft / spec.initial_state.files
            shutil.rmtree(files)
            shutil.copytree(start, files)
            (draft / spec.reference_solution.patch).unlink()  # (it fixes the source's state, not this one)
            (draft / DERIVED_PATCH).write_bytes(patch)
            raw["reference_solution"] = {"patch": DERIVED_PATCH}
        # what the judge said is the hidden tests' business (admission refuses an instruction that
        # names them): a failed judgement is said as such; a failing tool's output the agent saw
        if failure.failed_at_judgement:
            how = "the task's checks did not pass on it"
        else:
            said = (failure.message or "") + "\n" + failure.signature
            how = "it failed with: " + next(line.strip() for line in said.splitlines() if line.strip())[:400]
        where = (
            "The repository is exactly as an earlier attempt at this task left it"
            if blocker is None
            else "An earlier attempt at this task did not solve it"
        )
        raw.update(
            id=new_id,
            version=f"{spec.version}.{failure.episode_id.replace('-', '')[-12:]}",
            title=(f"{spec.title} " if spec.title else "") + f"(failure case {failure.case})",
            instruction=f"{where}; {how}. Finish the job. The original request follows.\n\n"
            + spec.instruction,
            lineage=TaskLineage(case=failure.case, derived_from=f"{spec.id}@{spec.version}",
                                episode=failure.episode_id).model_dump(mode="json"),
        )  # fmt: skip
        (draft / SPEC_FILE).write_text(_yaml(raw), encoding="utf-8")
        (draft / DRAFT_FILE).write_text(_draft_note(source, failure, blocker), encoding="utf-8")
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(draft, dest)
    return Draft(task=load_task(dest), from_episode_state=blocker is None, why_not=blocker)


class _Dumper(yaml.SafeDumper):
    """YAML a person edits: multi-line texts (the instruction) as literal blocks."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and all(c == "\n" or c.isprintable() for c in value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _yaml(raw: dict[str, Any]) -> str:
    return yaml.dump(raw, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def _draft_note(source: Task, failure: CaseFailure, blocker: str | None) -> str:
    seen = (failure.observation or "(nothing recorded)")[-OBSERVATION_CHARS:]
    start = (
        f"the state episode `{failure.episode_id}` left (its archived final state)"
        if blocker is None
        else f"`{source.id}`'s own initial state: {blocker}"
    )
    return (
        f"# Draft task from failure case `{failure.case}`\n\n"
        f"Derived from `{source.id}` version {source.spec.version}; it starts from {start}.\n\n"
        f"The failure ({failure.category}): `{failure.signature}`\n\n"
        f"What the episode saw at its failing step:\n\n```\n{seen}\n```\n\n"
        "The hidden tests are the source task's. Edit them to aim at this failure (keep the ones\n"
        "the failure names, add the cases it shows), then run `trajlake tasks admit` on this\n"
        "directory again: only an admitted task joins the rollout pool.\n"
    )
