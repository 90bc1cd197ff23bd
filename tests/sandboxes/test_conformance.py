"""One conformance suite, run against both real backends: every check is an actual attempt."""

from __future__ import annotations

import pytest

from sandboxes import SandboxBackend
from sandboxes.conformance import CHECKS, run_check


@pytest.mark.parametrize("check", list(CHECKS))
def test_conformance(backend: SandboxBackend, check: str) -> None:
    result = run_check(backend, check)
    assert result.passed, result.detail


@pytest.mark.parametrize("check", ["exec", "host_files", "privileges", "snapshot_restore"])
def test_local_backend_on_the_base_image(local_backend: SandboxBackend, base_image: str, check: str) -> None:
    """The local backend runs on the very root filesystem the docker image was made of."""
    result = run_check(local_backend, check, image=base_image)
    assert result.passed, result.detail
