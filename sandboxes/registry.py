"""Backends, registered by name, and the configuration they share."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar

from sandboxes.errors import SandboxError, SandboxUnavailableError
from sandboxes.interface import Sandbox, SandboxSpec


@dataclass(frozen=True)
class SandboxConfig:
    """Where sandboxes keep their state on the host, and who they run as."""

    runtime_dir: Path = Path("/run/trajlake/sandboxes")
    """Per-sandbox mounts and state; every parent must be traversable by ``host_uid``."""
    image_store: Path = Path("/var/lib/trajlake/images")
    """Recorded base images (``images.json``) and their unpacked root filesystems."""
    host_uid: int = 64000
    """Host uid (and gid) the ``local`` backend runs agents as; inside they are uid 1000."""
    docker_host: str | None = None
    """Docker engine URL (default: ``DOCKER_HOST`` or the local socket)."""
    default_image: str = "trajlake-base"
    """Image the ``docker`` backend uses when a spec names none."""
    extra: dict[str, str] = field(default_factory=dict)
    """Backend-specific options."""


class SandboxBackend(ABC):
    """Makes sandboxes of one kind."""

    name: ClassVar[str]
    """Registered name."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()

    @abstractmethod
    def unavailable_reason(self) -> str | None:
        """Why this backend cannot run here, or ``None`` when it can."""

    def ensure_available(self) -> None:
        """Raise :class:`SandboxUnavailableError` with the reason, if any."""
        reason = self.unavailable_reason()
        if reason:
            raise SandboxUnavailableError(f"sandbox backend {self.name!r} is unavailable: {reason}")

    def ensure_image(self, image: str | None) -> None:  # noqa: B027 - backends without images accept any
        """Check that sandboxes of ``image`` can start here (``None``: the backend's default files).

        Raises:
            ImageNotBuiltError: the image is not built (for this backend) yet; building it fixes that.
            SandboxUnavailableError: it cannot be used for another reason (unreachable files, drift,
                no engine); the message names the fix.
        """

    def image_unavailable_reason(self, image: str | None) -> str | None:
        """Why sandboxes of ``image`` cannot start here (one sentence with the fix), or ``None``."""
        try:
            self.ensure_image(image)
        except SandboxError as exc:
            return str(exc)
        return None

    @abstractmethod
    def create(self, spec: SandboxSpec, *, sandbox_id: str | None = None) -> Sandbox:
        """Start a sandbox in the spec's initial state.

        Raises:
            SandboxUnavailableError: the backend cannot run here or the image is unknown.
            SandboxQuotaError: the initial state does not fit the disk bound.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release backend-wide resources (engine connections)."""


B = TypeVar("B", bound=type[SandboxBackend])
_REGISTRY: dict[str, type[SandboxBackend]] = {}


def register_backend(cls: B) -> B:
    """Class decorator: make a backend available under its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise SandboxError(f"sandbox backend {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def backend_names() -> list[str]:
    """Names of every registered backend."""
    _load_builtin()
    return sorted(_REGISTRY)


def get_backend(name: str, config: SandboxConfig | None = None) -> SandboxBackend:
    """An instance of the backend registered as ``name``.

    Raises:
        SandboxError: no such backend.
    """
    _load_builtin()
    try:
        factory: Callable[[SandboxConfig | None], SandboxBackend] = _REGISTRY[name]
    except KeyError:
        raise SandboxError(
            f"unknown sandbox backend {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None
    return factory(config)


def _load_builtin() -> None:
    # Importing the modules registers them; kept lazy so ``docker`` is only
    # imported by those who use it.
    import importlib.util

    if importlib.util.find_spec("sandboxes.docker_backend"):
        import sandboxes.docker_backend  # noqa: F401
    import sandboxes.local  # noqa: F401


def is_root() -> bool:
    """Running with euid 0."""
    return os.geteuid() == 0
