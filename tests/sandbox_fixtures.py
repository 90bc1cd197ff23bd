"""Sandbox fixtures: the real backends, skipped only where they cannot run.

``TRAJLAKE_REQUIRE_SANDBOXES=1`` (set by ``.ci/run``) turns "cannot run here"
into a failure, so CI never passes by skipping the real engines.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes import ImageStore, SandboxBackend, SandboxConfig, build_image, get_backend
from sandboxes.docker_backend import docker_client

REQUIRED = os.environ.get("TRAJLAKE_REQUIRE_SANDBOXES") == "1"
IMAGE = "trajlake-base"


def _unavailable(what: str, reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{what} is required here (TRAJLAKE_REQUIRE_SANDBOXES=1) but unavailable: {reason}")
    pytest.skip(f"{what} unavailable: {reason}")


@pytest.fixture(scope="session")
def sandbox_config() -> SandboxConfig:
    """Runtime state under a directory of this session; images in the store the settings name.

    That is the machine-wide store unless ``TRAJLAKE_IMAGE_STORE`` names another (``.ci/run``
    points it at the store its fresh-machine demo run built).
    """
    from trajlake.settings import Settings

    return SandboxConfig(
        runtime_dir=Path(f"/run/trajlake-test/{uuid.uuid4().hex[:8]}"), image_store=Settings().image_store
    )


@pytest.fixture
def reachable_tmp() -> Iterator[Path]:
    """A fresh directory the sandbox user can pass through (pytest's own ``tmp_path`` is 0700)."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="trajlake-test-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def local_backend(sandbox_config: SandboxConfig) -> SandboxBackend:
    backend = get_backend("local", sandbox_config)
    reason = backend.unavailable_reason()
    if reason:
        _unavailable("the local sandbox backend", reason)
    return backend


@pytest.fixture(scope="session")
def base_image(sandbox_config: SandboxConfig) -> str:
    """The base image, built (debootstrap -> docker import) once per machine if missing."""
    try:
        client = docker_client(sandbox_config)
    except Exception as exc:  # noqa: BLE001
        _unavailable("the Docker engine", str(exc))
    if os.geteuid() != 0:
        _unavailable("building the base image", "needs root")
    build_image(ImageStore(sandbox_config.image_store), name=IMAGE, docker_client=client)
    client.close()
    return IMAGE


@pytest.fixture(scope="session")
def docker_backend(sandbox_config: SandboxConfig, base_image: str) -> Iterator[SandboxBackend]:
    backend = get_backend("docker", sandbox_config)
    reason = backend.unavailable_reason()
    if reason:
        _unavailable("the docker sandbox backend", reason)
    yield backend
    backend.close()


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> SandboxBackend:
    """Each real backend in turn."""
    return request.getfixturevalue(f"{request.param}_backend")  # type: ignore[no-any-return]
