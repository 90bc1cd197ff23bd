"""The ``Judge`` base class, the registry, and versions derived from code and configuration.

A judge is registered by name; ``build_judge({"name": ..., "config": ...})``
rebuilds exactly the judge a ``reward`` event names, because the event carries
that spec. A judge's version is never written by hand: it is a hash of the
source of the modules that define its behaviour and of its validated
configuration, so changing either makes a new version.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
import traceback
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from judges.errors import JudgeConfigError, WorkspaceUnjudgeable
from judges.judgement import Flag, Judgement, Verdict
from sandboxes.errors import SandboxError

if TYPE_CHECKING:
    from judges.context import JudgeContext


class JudgeConfig(BaseModel):
    """Base of every judge's configuration model (unknown keys are an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass
class Outcome:
    """What a judge's own logic decides; the base class adds name, version and spec."""

    score: float
    verdict: Verdict
    components: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    flags: list[Flag] = field(default_factory=list)
    detail: str | None = None


class Judge(ABC):
    """A function of (trajectory, final sandbox state) to a :class:`Judgement`."""

    name: ClassVar[str]
    """Registered name."""
    Config: ClassVar[type[JudgeConfig]] = JudgeConfig
    """Validates the configuration."""
    code_modules: ClassVar[tuple[str, ...]] = ()
    """Modules besides the judge's own whose code decides its behaviour."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        try:
            self.config = self.Config.model_validate(dict(config or {}))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise JudgeConfigError(f"invalid configuration of judge {self.name!r}: {problems}") from None

    def spec(self) -> dict[str, JsonValue]:
        """Name and configuration: what ``build_judge`` needs to rebuild this judge."""
        return {"name": self.name, "config": self.config.model_dump(mode="json")}

    def version_inputs(self) -> dict[str, Any]:
        """What the version hashes: what the modules' code does, and the configuration."""
        # every judge reads the judged tree that judges.final_state decides (judges.context holds it)
        base = ["judges.judgement", "judges.context", "judges.final_state"]
        modules = [type(self).__module__, __name__, *base,
                   *self.code_modules]  # fmt: skip
        code = {mod: _module_digest(mod) for mod in dict.fromkeys(modules)}
        return {"name": self.name, "code": code, "config": self.config.model_dump(mode="json")}

    @cached_property
    def version(self) -> str:
        """Content hash of the judge's code and configuration (16 hex digits)."""
        text = json.dumps(self.version_inputs(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __call__(self, ctx: JudgeContext) -> Judgement:
        """Judge one trajectory and its final state.

        A sandbox that breaks while judging, or a bug in the judge, gives verdict
        ``error`` (the judge could not run), never ``fail``.
        """
        try:
            if ctx.sandbox is not None:
                ctx.final_state()  # what every judge reads (and runs in: ctx.judged_sandbox())
            out = self._judge(ctx)
        except WorkspaceUnjudgeable as exc:  # the agent's doing, so never filed as infrastructure
            flag = Flag(kind=exc.kind, evidence=str(exc))
            out = Outcome(0.0, "fail", flags=[flag], detail=f"the workspace cannot be judged: {exc}")
        except SandboxError as exc:
            out = Outcome(0.0, "error", detail=f"sandbox failed while judging: {type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a judge bug is an error verdict, not a crash
            tb = traceback.format_exception(exc)[-3:]
            out = Outcome(
                0.0,
                "error",
                evidence={"traceback": "".join(tb)[-2000:]},
                detail=f"judge raised {type(exc).__name__}: {exc}",
            )
        return Judgement(
            judge_name=self.name,
            judge_version=self.version,
            judge_spec=self.spec(),
            score=round(float(out.score), 6),
            verdict=out.verdict,
            components={k: round(float(v), 6) for k, v in out.components.items()},
            evidence=_clean(out.evidence),
            flags=[Flag(kind=f.kind, evidence=_clean(f.evidence)) for f in out.flags],
            detail=_clean(out.detail),
        )

    @abstractmethod
    def _judge(self, ctx: JudgeContext) -> Outcome:
        """The judge's own logic."""


def _clean(value: Any) -> Any:
    """``value`` with every string made encodable as UTF-8.

    The agent names the files and writes the output that evidence quotes, and a lone surrogate in
    a reward event would fail its serialisation (the episode would then end with no reward at all).
    """
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def source_digest(source: str) -> str:
    """sha256 of what a module's source does: its syntax tree without docstrings, comments or layout.

    A judge's version changes when its behaviour can change and not otherwise, so editing a
    comment or a docstring keeps every stored score valid; source that does not parse is hashed
    as text.
    """
    from judges.code_facts import meaning

    return hashlib.sha256((meaning(source) or source).encode()).hexdigest()


@functools.cache
def _module_digest(module: str) -> str:
    """:func:`source_digest` of a loaded module (read once per process; a judge is built per episode)."""
    if module in sys.modules:
        source = inspect.getsource(sys.modules[module])
    else:  # a module the judge runs elsewhere (e.g. in the sandbox): its file, without importing it
        import importlib.util

        spec = importlib.util.find_spec(module)
        source = Path(spec.origin).read_text() if spec is not None and spec.origin else ""
    return source_digest(source)


J = TypeVar("J", bound=type[Judge])
_REGISTRY: dict[str, type[Judge]] = {}


def register_judge(cls: J) -> J:
    """Class decorator: make a judge buildable by its ``name``."""
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise JudgeConfigError(f"judge {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtin() -> None:
    import judges.builtin  # noqa: F401 - registers the built-in judges


def judge_names() -> list[str]:
    """Every registered judge name."""
    _load_builtin()
    return sorted(_REGISTRY)


def build_judge(spec: Mapping[str, Any] | Any) -> Judge:
    """The judge a spec describes: ``{"name": ..., "config": {...}}`` (or a ``JudgeSpec``).

    Raises:
        JudgeConfigError: unknown name or invalid configuration.
    """
    _load_builtin()
    if hasattr(spec, "model_dump"):
        spec = spec.model_dump()
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise JudgeConfigError(f"a judge spec needs a name: {spec!r}")
    cls = _REGISTRY.get(str(spec["name"]))
    if cls is None:
        raise JudgeConfigError(f"unknown judge {spec['name']!r}; known: {', '.join(sorted(_REGISTRY))}")
    return cls(spec.get("config") or {})
