"""Classpaths of JVM components, resolved from Maven Central by Maven.

A small pom per component lives beside this module (``infra/kafka/pom.xml``,
``infra/spark/pom.xml``). Maven resolves its runtime dependencies into ``~/.m2``
once; the resulting classpath is cached per digest of the pom under
``$XDG_CACHE_HOME/trajlake`` (``~/.cache/trajlake``), so later runs start
without Maven.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from schemas.errors import UnavailableError


class MavenError(UnavailableError):
    """Maven is missing or could not resolve a component's jars."""


def pom_path(component: str) -> Path:
    """The pom of ``component`` (``kafka``, ``spark``) shipped in the ``infra`` package."""
    return Path(str(resources.files(f"infra.{component}").joinpath("pom.xml")))


def _cache_file(pom: Path) -> Path:
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    cache_dir = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trajlake"
    return cache_dir / f"{pom.parent.name}-classpath-{digest}.txt"


def cached_classpath(pom: Path) -> list[str] | None:
    """The classpath of ``pom`` if it was resolved before and every jar is still there; never runs Maven."""
    cache = _cache_file(pom)
    try:
        jars = [p for p in cache.read_text().strip().split(os.pathsep) if p]
    except OSError:
        return None
    return jars if jars and all(Path(p).exists() for p in jars) else None


def build_classpath(
    pom: Path,
    label: str,
    progress: Callable[[str], None] | None = None,
    *,
    settings: Path | None = None,
    timeout_s: float | None = None,
) -> list[str]:
    """The runtime classpath of ``pom``, resolved once per pom digest.

    Args:
        pom: the pom to resolve.
        label: what the jars are, for messages (``the Apache Kafka jars``).
        progress: told when Maven has to run (the first time only).
        settings: a Maven settings file to resolve with (``mvn -s``), e.g. one whose
            ``<mirror>`` sends every repository a dependency's poms name to Maven Central.
        timeout_s: give up on Maven after this long (a repository that does not answer
            can hold it for many minutes); ``None`` waits.

    Raises:
        MavenError: Maven is missing or could not resolve the jars.
    """
    cache = _cache_file(pom)
    jars = cached_classpath(pom)
    if jars is not None:
        return jars
    cache_dir = cache.parent
    mvn = shutil.which("mvn")
    if not mvn:
        raise MavenError(
            f"Maven (mvn) not found: it resolves {label} from Maven Central (e.g. `apt-get install maven`)"
        )
    if progress:
        progress(f"resolving {label} from Maven Central (first run only)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    try:
        proc = subprocess.run(
            [mvn, "-q", "-B", *(["-s", str(settings)] if settings is not None else []), "-f", str(pom),
             "dependency:build-classpath", f"-Dmdep.outputFile={tmp}", "-Dmdep.includeScope=runtime"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        tmp.unlink(missing_ok=True)
        raise MavenError(f"Maven did not resolve {label} within {timeout_s:.0f} s") from exc
    if proc.returncode != 0 or not tmp.exists():
        tail = (proc.stdout + proc.stderr)[-2000:]
        raise MavenError(f"Maven could not resolve {label}:\n{tail}")
    tmp.replace(cache)
    return [p for p in cache.read_text().strip().split(os.pathsep) if p]
