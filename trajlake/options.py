"""The arguments commands share, validated once by the command-line parser.

A bad value is refused before a command starts (exit status 2, one sentence
from the parser naming the option), so no command checks its own arguments
and none gets as far as a worker process with a value it cannot use.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer


class SandboxBackendName(StrEnum):
    """Sandbox backends (``sandboxes.backend_names()``)."""

    local = "local"
    docker = "docker"


class LearnerBackend(StrEnum):
    """Learner frameworks."""

    torch = "torch"
    jax = "jax"


class Runner(StrEnum):
    """Where the pipeline's Beam graph runs."""

    local = "local"
    dask = "dask"


RunnerOpt = Annotated[
    Runner,
    typer.Option(
        help="local: Beam's FnApiRunner here; dask: Beam's DaskRunner on a dask.distributed cluster."
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(help="Dask scheduler address (tcp://HOST:PORT); without it a local cluster of --workers "
                 "worker processes is started for the run."),
]  # fmt: skip


def check_policy(value: str | None) -> str | None:
    """Parser callback: the policy spec is well formed and what it names exists."""
    if value is None:
        return None
    from rollouts import PolicySpecError
    from trajlake.policy_specs import check_policy_spec

    try:
        check_policy_spec(value)
    except PolicySpecError as exc:
        raise typer.BadParameter(str(exc)) from exc
    return value


BackendOpt = Annotated[
    SandboxBackendName | None,
    typer.Option("--backend", "-b", help="Sandbox backend (default: TRAJLAKE_SANDBOX_BACKEND)."),
]
Workers = Annotated[int, typer.Option(min=1, help="Processes or sandboxes working at once.")]
Limit = Annotated[int, typer.Option(min=0, help="At most this many rows or records.")]
DeltaVersion = Annotated[int | None, typer.Option(min=0, help="Delta version (time travel).")]
LakeOpt = Annotated[Path | None, typer.Option(help="Lake directory (default: $TRAJLAKE_HOME/lake).")]
TaskDirs = Annotated[
    list[Path],
    typer.Option("--tasks", exists=True, help="Task directories, or folders of them (repeatable)."),
]
PolicyOpt = Annotated[
    str,
    typer.Option(
        callback=check_policy,
        help="scripted:reference | scripted:FILE.yaml | openai:URL#MODEL | local:CHECKPOINT_DIR[?k=v&...]",
    ),
]


def check_judge_spec(text: str | None) -> dict[str, Any] | None:
    """Parser callback: ``--judge`` as inline JSON or ``@file`` (JSON or YAML), built once to check it."""
    if text is None:
        return None
    if text.startswith("@"):
        import yaml

        path = Path(text[1:])
        if not path.is_file():
            raise typer.BadParameter(f"no judge spec file {path}")
        try:
            spec = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise typer.BadParameter(f"{path} is not YAML or JSON: {exc}") from exc
    else:
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON ({exc}); give JSON or @file.yaml") from exc
    if not isinstance(spec, dict) or "name" not in spec:
        raise typer.BadParameter('a judge spec is {"name": ..., "config": {...}}')
    from judges import build_judge
    from schemas.errors import TrajlakeError

    try:
        build_judge(spec)
    except TrajlakeError as exc:
        raise typer.BadParameter(str(exc)) from exc
    return spec


def judge_spec_option(help: str) -> Any:
    """A ``--judge SPEC`` option (JSON or ``@file``), checked to build a judge when parsed."""
    return typer.Option(parser=str, callback=check_judge_spec, metavar="SPEC",
                        help='JSON {"name":..,"config":{..}} or @FILE: ' + help)  # fmt: skip
