"""Task specs (YAML), the families' defaults, and loading them from disk.

A task is a directory::

    <task>/task.yaml        the spec (id, family, version, tier, instruction, limits, ...)
    <task>/repo/            the initial state of the workspace
    <task>/hidden_tests/    copied into the workspace only when judging
    <task>/solution.patch   the reference solution (or solution.sh: a script run in the sandbox)

Fields a whole family shares (the judge, the reference-solution kind, limits)
live in ``<family dir>/family.yaml`` and are deep-merged under each task's own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from judges.errors import TaskSetupError, TaskSpecError
from sandboxes.interface import ExecResult, Sandbox
from schemas.events import TaskRef

SPEC_FILE = "task.yaml"
FAMILY_FILE = "family.yaml"


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InitialState(_Spec):
    """How the workspace starts."""

    files: str = "repo"
    """Directory (relative to the task) copied in as the workspace."""
    setup: list[str] = Field(default_factory=list)
    """Shell commands run in the sandbox, as the agent, after the files are in."""
    image: str | None = "trajlake-base"
    """Base image (recorded name or digest) the task runs on."""


class HiddenTests(_Spec):
    """Tests the policy never sees."""

    dir: str = "hidden_tests"
    """Directory (relative to the task) holding them."""
    target: str = "tests_hidden"
    """Their directory name when they run (in the workspace only with ``runs: sandbox``)."""
    runs: Literal["outputs", "bridge", "sandbox"] = "sandbox"
    """Where they run (see :mod:`judges.host_run`): ``outputs``: on the host, against a copy of
    the files the agent left (tests that only read files); ``bridge``: on the host, calling the
    agent's package in the sandbox through the bridge (the tests and their expected values never
    enter the sandbox); ``sandbox``: copied into the workspace and run there by pytest, in the
    same process as the agent's code (for tests that need that; the report is cross-checked)."""


class ReferenceSolution(_Spec):
    """What solves the task: a patch applied with ``git apply``, or a script."""

    patch: str | None = None
    """Unified diff (relative to the task), applied in the workspace root."""
    script: str | None = None
    """Shell script (relative to the task) run with ``sh`` in the workspace root."""

    @model_validator(mode="after")
    def _one(self) -> ReferenceSolution:
        if (self.patch is None) == (self.script is None):
            raise ValueError("give exactly one of `patch` and `script`")
        return self


class GeneratedCheck(_Spec):
    """A hidden check whose inputs are drawn at judge time (see :mod:`judges.generated`).

    The inputs come from the task's generator module, seeded by a secret of the judge's host, so
    the agent can neither know nor learn them; the expected outputs come from
    the task's reference solution, run by the judge outside the agent's sandbox.
    """

    module: str = "generator.py"
    """The generator (relative to the task; stdlib only): ``cases``/``call`` for a family whose tests
    call the agent's package (``bridge``), ``inputs`` for one whose agent leaves a ``procedure``."""
    cases: int = Field(default=40, ge=1, le=1000)
    """Cases drawn per judging (``bridge``), or input sets the procedure runs on (``outputs``)."""
    procedure: str | None = None
    """``outputs`` families: the agent's script (relative to the workspace, run with ``sh`` from its
    root) the judge runs again on each generated input set; the instruction must ask for it."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit of one run of the procedure (the reference's and the agent's)."""


class JudgeSpec(_Spec):
    """A judge by name and configuration (see :mod:`judges.registry`)."""

    name: str
    config: dict[str, Any] = Field(default_factory=dict)


class TaskLimits(_Spec):
    """Limits the rollout worker enforces."""

    max_steps: int = Field(default=30, ge=1)
    time_limit_s: float = Field(default=600.0, gt=0)


class TaskLineage(_Spec):
    """Where a derived task came from (``trajlake tasks derive``)."""

    case: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,79}$")
    """The failure case it targets (``failure_cases.case_id``)."""
    derived_from: str
    """The source task, ``<id>@<version>``."""
    episode: str | None = None
    """The failing episode it was drafted from."""


class TaskSpec(_Spec):
    """One task, validated."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,127}$")
    """Unique id."""
    family: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    """Family the task belongs to."""
    version: str
    """Spec version; bump it when anything about the task changes."""
    tier: Literal["easy", "medium", "hard"]
    """Difficulty tier."""
    title: str = ""
    """One line."""
    instruction: str
    """What the policy is told (an issue, a request)."""
    initial_state: InitialState = Field(default_factory=InitialState)
    hidden_tests: HiddenTests = Field(default_factory=HiddenTests)
    reference_solution: ReferenceSolution
    judge: JudgeSpec
    limits: TaskLimits = Field(default_factory=TaskLimits)
    generated: GeneratedCheck | None = None
    """The task's generated check (``None``: its hidden tests are fixed examples only)."""
    lineage: TaskLineage | None = None
    """For a task drafted from a failure case: the case, the source task and the episode."""
    nondeterministic: list[str] | None = None
    """Regular expressions for what a tool's output may change between runs of this task beyond the
    defaults (:data:`pipelines.drift.DEFAULT_NONDETERMINISM`); ``trajlake drift`` replaces them first."""
    split: Literal["train", "eval"] | None = None
    """Declared split (``None``: admission assigns one, :func:`judges.splits.split_of`, and records it)."""

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v

    @field_validator("nondeterministic")
    @classmethod
    def _patterns(cls, v: list[str] | None) -> list[str] | None:
        for pattern in v or ():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from exc
        return v

    @field_validator("instruction")
    @classmethod
    def _instruction(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the instruction is empty")
        return v


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _tree_digest(root: Path) -> str:
    """sha256 over the sorted (path, executable bit, content) of every file under ``root``."""
    h = hashlib.sha256()
    if not root.is_dir():
        return h.hexdigest()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".pytest_cache"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0")
            if path.is_symlink():
                h.update(b"L" + os.readlink(path).encode())
            else:
                h.update(b"X" if os.access(path, os.X_OK) else b"F")
                h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@dataclass(frozen=True)
class Task:
    """A loaded task: its validated spec and the directory it lives in."""

    spec: TaskSpec
    root: Path
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def prepare(self, sandbox: Sandbox) -> list[ExecResult]:
        """Put the sandbox in the task's initial state: its files, then its setup commands.

        The one way every caller (rollouts, golden sets, admission) starts from the task.

        Raises:
            SandboxError: the sandbox broke.
            TaskSetupError: a setup command failed (the task's initial state does not build).
        """
        sandbox.reset(workspace=self.initial_dir)
        results = []
        for cmd in self.spec.initial_state.setup:
            r = sandbox.exec(cmd, timeout=300)
            if r.exit_code != 0:
                raise TaskSetupError(f"setup command {cmd!r} of {self.id} failed (exit {r.exit_code}): "
                                     f"{r.stderr[-300:]}")  # fmt: skip
            results.append(r)
        return results

    @property
    def id(self) -> str:
        """The task id."""
        return self.spec.id

    @property
    def ref(self) -> TaskRef:
        """The ``TaskRef`` episodes of this task carry."""
        return TaskRef(id=self.spec.id, version=self.spec.version, family=self.spec.family)

    @property
    def initial_dir(self) -> Path:
        """The initial workspace files."""
        return self.root / self.spec.initial_state.files

    @property
    def hidden_dir(self) -> Path:
        """The hidden tests."""
        return self.root / self.spec.hidden_tests.dir

    def hidden_files(self) -> dict[str, bytes]:
        """Every hidden test file, by path relative to the hidden directory."""
        out: dict[str, bytes] = {}
        if self.hidden_dir.is_dir():
            for path in sorted(self.hidden_dir.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    out[path.relative_to(self.hidden_dir).as_posix()] = path.read_bytes()
        return out

    @property
    def generator_path(self) -> Path | None:
        """The generated check's module (``None``: the task has no generated check)."""
        gen = self.spec.generated
        return None if gen is None else (self.root / gen.module).resolve()

    def reference_bytes(self) -> bytes:
        """The reference patch or script."""
        ref = self.spec.reference_solution
        return (self.root / (ref.patch or ref.script or "")).read_bytes()

    @cached_property
    def spec_digest(self) -> str:
        """sha256 of the validated spec (canonical JSON; fields added later are left out while unset)."""
        dumped = self.spec.model_dump(mode="json")
        for added in ("lineage", "split", "nondeterministic"):
            if dumped.get(added) is None:
                dumped.pop(added, None)
        text = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @cached_property
    def content_digest(self) -> str:
        """sha256 of the spec and every file of the task (initial state, hidden tests, solution)."""
        h = hashlib.sha256(self.spec_digest.encode())
        h.update(_tree_digest(self.initial_dir).encode())
        h.update(_tree_digest(self.hidden_dir).encode())
        h.update(hashlib.sha256(self.reference_bytes()).digest())
        gen = self.generator_path
        if gen is not None and gen.is_file():
            h.update(hashlib.sha256(gen.read_bytes()).digest())
        return h.hexdigest()


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise TaskSpecError(f"{path}: no such file", str(path)) from None
    except yaml.YAMLError as exc:
        raise TaskSpecError(f"{path}: not valid YAML: {exc}", str(path)) from exc
    if not isinstance(data, dict):
        raise TaskSpecError(f"{path}: expected a mapping at the top level", str(path))
    return data


def load_task(path: str | Path) -> Task:
    """Load and validate the task in a directory (or given by its ``task.yaml``).

    Raises:
        TaskSpecError: missing or malformed spec, or a referenced file missing.
    """
    p = Path(path)
    spec_path = p if p.is_file() else p / SPEC_FILE
    root = spec_path.parent
    raw = _read_yaml(spec_path)
    family_file = root.parent / FAMILY_FILE
    merged = _deep_merge(_read_yaml(family_file), raw) if family_file.exists() else raw
    try:
        spec = TaskSpec.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or '<spec>'}: {e['msg']}" for e in exc.errors()
        )
        raise TaskSpecError(f"{spec_path}: invalid task spec: {problems}", str(spec_path)) from None
    task = Task(spec=spec, root=root, raw=merged)
    missing = [
        name
        for name, target in (
            ("initial_state.files", task.initial_dir),
            ("hidden_tests.dir", task.hidden_dir),
            (
                "reference_solution",
                root / (spec.reference_solution.patch or spec.reference_solution.script or ""),
            ),
        )
        if not target.exists()
    ]
    if missing:
        raise TaskSpecError(f"{spec_path}: referenced files missing: {', '.join(missing)}", str(spec_path))
    return task


def find_task_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Every directory holding a ``task.yaml`` under the given paths, sorted."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file() and p.name == SPEC_FILE:
            found.add(p.parent)
        elif (p / SPEC_FILE).is_file():
            found.add(p)
        elif p.is_dir():
            found.update(s.parent for s in p.rglob(SPEC_FILE))
        else:
            raise TaskSpecError(f"{p}: no such task or directory", str(p))
    return sorted(found)
