"""A real small filesystem (tmpfs) for tests that fill a disk."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. ``4m``) at ``where`` for the block (skips unless root)."""
    from sandboxes.mounts import mount, umount

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    mount("tmpfs", where, "tmpfs", f"size={size}")
    try:
        yield where
    finally:
        umount(where)
