"""Checks that a command's prerequisites are ready, run before the command starts its work.

Each ``require_*`` either returns what was asked for or raises an
:class:`~schemas.errors.UnavailableError` whose message names what is missing and
the command that prepares it; :func:`prepare_images` builds the base image where
that is cheap and safe (the ``local`` backend: debootstrap into the image store,
about a minute). ``trajlake doctor`` runs the same checks as a table
(:mod:`trajlake.doctor`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.kafka_broker import require_broker
from lake import Lake, TableMissingError
from sandboxes import SandboxBackend, get_backend

if TYPE_CHECKING:
    from trajlake.settings import Settings

__all__ = ["prepare_images", "require_backend", "require_broker", "require_images", "require_lake"]


def require_backend(settings: Settings, name: str | None = None) -> SandboxBackend:
    """The sandbox backend ``name`` (default: the settings'), checked to run here.

    Raises:
        SandboxUnavailableError: it cannot run here (not root, bubblewrap missing, no Docker engine).
    """
    backend = get_backend(name or settings.sandbox_backend, settings.sandbox_config())
    backend.ensure_available()
    return backend


def require_images(backend: SandboxBackend, images: Iterable[str | None]) -> None:
    """Every image is usable by ``backend`` (recorded, its files present, in the engine).

    Raises:
        SandboxUnavailableError: the first image that is not, with the command that builds it.
    """
    for image in sorted({i for i in images if i is not None}):
        backend.ensure_image(image)


def prepare_images(
    settings: Settings,
    backend: SandboxBackend,
    images: Iterable[str | None],
    *,
    progress: Callable[[str], None],
) -> list[str]:
    """Build the images ``backend`` lacks, when they are the project's base image recipe.

    The ``local`` backend only needs the unpacked root filesystem, so no Docker
    engine is involved; for ``docker`` the engine must already answer (checked by
    :func:`require_backend`) and the image is imported into it.

    Returns:
        The names of the images that were built.

    Raises:
        SandboxUnavailableError: an image is missing that is not a base image trajlake knows how to
            build, or the build cannot run here (not root, no debootstrap).
        ImageError: the build itself failed (its log tail is in the message).
    """
    from sandboxes import ImageNotBuiltError, ImageStore, build_image
    from sandboxes.docker_backend import docker_client

    built = []
    for image in sorted({i for i in images if i is not None}):
        try:
            backend.ensure_image(image)
            continue
        except ImageNotBuiltError:
            # only a missing record is prepared here; a store the sandboxes cannot reach, a
            # drifted docker tag or a deleted root filesystem is the user's to look at
            if image != settings.sandbox_image:
                raise
        progress(
            f"building the base image {image!r} for the {backend.name} backend (first run only, about a "
            f"minute: debootstrap from the Debian mirror into {settings.image_store})"
        )
        client = docker_client(settings.sandbox_config()) if backend.name == "docker" else None
        try:
            record, _ = build_image(
                ImageStore(settings.image_store), name=image, docker_client=client,
                on_line=_stage_printer(image, progress),
            )  # fmt: skip
        finally:
            if client is not None:
                client.close()
        progress(f"built {image!r}: rootfs sha256 {record.rootfs_sha256[:16]}, {record.size_bytes >> 20} MiB")
        backend.ensure_image(image)
        built.append(image)
    return built


def _stage_printer(image: str, progress: Callable[[str], None]) -> Callable[[str], None]:
    """One progress line per debootstrap stage ("I: Retrieving ...", "I: Extracting ...")."""
    last = [""]

    def on_line(line: str) -> None:
        stage = line[3:].split(" ")[0] if line.startswith("I: ") else ""
        if stage and stage != last[0]:
            last[0] = stage
            progress(f"  {image}: {line[3:][:100]}")

    return on_line


def require_lake(
    root: str | Path, tables: Iterable[str] = (), *, storage_options: dict[str, str] | None = None
) -> Lake:
    """The lake at ``root``, holding at least one table and every table of ``tables``.

    Raises:
        TableMissingError: no lake there, or one of ``tables`` is not in it.
        LakeDamagedError: one of them (every table, when ``tables`` is empty) is damaged: its
            log, or a data file gone or resized.
    """
    from lake.check import refuse_damaged

    lake = Lake(str(root), storage_options or None)
    present = lake.versions()
    if not present:
        raise TableMissingError(
            f"no lake at {root} (no Delta tables there); build it from the log with "
            "`trajlake pipeline run --once`, or name another one with --lake"
        )
    missing = [t for t in tables if t not in present]
    if missing:
        raise TableMissingError(
            f"the lake at {root} has no table {', '.join(missing)} yet; "
            "`trajlake pipeline run --once` folds the log into it"
        )
    refuse_damaged(lake, tuple(tables) or tuple(present))
    return lake
