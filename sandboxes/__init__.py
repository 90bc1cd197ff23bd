"""Isolated, resettable execution environments for agent actions and judges.

Backends are registered by name (``local``: Linux namespaces via bubblewrap,
overlayfs and cgroup v1; ``docker``: a real Docker engine), share one
:class:`Sandbox` interface and one conformance suite, and are handed out by a
:class:`SandboxPool`.
"""

from sandboxes.errors import (
    ImageDriftError,
    ImageError,
    ImageNotBuiltError,
    PoolClosedError,
    PoolTimeoutError,
    SandboxClosedError,
    SandboxCrashedError,
    SandboxError,
    SandboxPathError,
    SandboxQuotaError,
    SandboxUnavailableError,
    SnapshotNotFoundError,
)
from sandboxes.images import ImageRecord, ImageStore, build_image
from sandboxes.interface import WORKSPACE, ExecResult, LifecycleListener, Sandbox, SandboxSpec
from sandboxes.pool import PoolMetrics, SandboxPool
from sandboxes.registry import SandboxBackend, SandboxConfig, backend_names, get_backend, register_backend

__all__ = [
    "WORKSPACE",
    "ExecResult",
    "ImageDriftError",
    "ImageError",
    "ImageNotBuiltError",
    "ImageRecord",
    "ImageStore",
    "LifecycleListener",
    "PoolClosedError",
    "PoolMetrics",
    "PoolTimeoutError",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosedError",
    "SandboxConfig",
    "SandboxCrashedError",
    "SandboxError",
    "SandboxPathError",
    "SandboxPool",
    "SandboxQuotaError",
    "SandboxSpec",
    "SandboxUnavailableError",
    "SnapshotNotFoundError",
    "backend_names",
    "build_image",
    "get_backend",
    "register_backend",
]
