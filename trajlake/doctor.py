"""``trajlake doctor``: is this machine ready for trajlake, and what fixes each thing that is not.

One row per prerequisite, each checked for real (a Java that runs, jars that
exist, a namespace that bubblewrap can make, a broker that answers, tables
whose logs open). A row is ``ok``, ``missing`` (with the fix) or ``optional``
(missing, but nothing the demo needs: the Docker engine when sandboxes run on
the ``local`` backend). The command exits 0 only when nothing is ``missing``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from schemas.errors import TrajlakeError

if TYPE_CHECKING:
    from trajlake.settings import Settings

MIN_FREE_BYTES = 2 << 30
"""Free space the demo needs under ``TRAJLAKE_HOME`` (broker storage, lake, checkpoints, blobs)."""


@dataclass(frozen=True)
class CheckRow:
    """The outcome of one check."""

    name: str
    """What was checked."""
    status: Literal["ok", "missing", "optional"]
    """``missing`` fails the doctor; ``optional`` is reported and does not."""
    detail: str
    """What was found."""
    fix: str = ""
    """The command (or step) that fixes a row that is not ``ok``."""


def _ok(name: str, detail: str) -> CheckRow:
    return CheckRow(name, "ok", detail)


def _missing(name: str, detail: str, fix: str, *, required: bool = True) -> CheckRow:
    return CheckRow(name, "missing" if required else "optional", detail, fix)


def check_python() -> CheckRow:
    """Python 3.11 or newer runs trajlake."""
    v = sys.version_info
    text = f"{v.major}.{v.minor}.{v.micro} at {sys.executable}"
    if v < (3, 11):
        return _missing("python", text, "install Python 3.11+ and run ./dev again")
    return _ok("python", text)


def check_java() -> CheckRow:
    """A Java 17+ runtime runs the embedded broker (and Spark)."""
    from ingest.kafka_broker import EmbeddedKafka

    try:
        java = EmbeddedKafka.check_java()
    except TrajlakeError as exc:
        return _missing("java", str(exc), "apt-get install openjdk-17-jre-headless")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    return _ok("java", f"{(out.splitlines() or ['?'])[0]} at {java}")


def check_kafka_jars() -> CheckRow:
    """The broker's jars were resolved from Maven Central (Maven runs only when they were not)."""
    from ingest.kafka_broker import EmbeddedKafka

    jars = EmbeddedKafka.resolved_jars()
    mvn = shutil.which("mvn")
    if jars:
        return _ok("kafka jars", f"{len(jars)} jars resolved under {os.path.commonpath(jars)}")
    if not mvn:
        return _missing("kafka jars", "not resolved, and Maven (mvn) is not installed",
                        "apt-get install maven, then `trajlake up`")  # fmt: skip
    return _missing("kafka jars", f"not resolved yet (Maven at {mvn})",
                    "`trajlake up` (Maven resolves them from Maven Central, once)")  # fmt: skip


def check_bubblewrap() -> CheckRow:
    """Bubblewrap can make the namespaces the local backend runs in (a real attempt)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return _missing("bubblewrap", "bwrap not found", "apt-get install bubblewrap")
    try:
        proc = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _missing("bubblewrap", f"{bwrap} did not run: {exc}", "check the kernel's namespace support")
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        fix = "enable user and network namespaces (sysctl user.max_user_namespaces) or run as root"
        return _missing("bubblewrap", f"cannot make namespaces: {detail}", fix)
    return _ok("bubblewrap", f"{bwrap}: user, pid, net, ipc, uts and mount namespaces work")


def check_local_backend(settings: Settings) -> CheckRow:
    """The local backend's other needs: root, util-linux tools, overlayfs, cgroup v1 controllers."""
    from sandboxes import get_backend
    from sandboxes.cgroups import controller_mounts

    required = settings.sandbox_backend == "local"
    reason = get_backend("local", settings.sandbox_config()).unavailable_reason()
    if reason:
        return _missing("cgroups + overlayfs", reason, "run as root on a kernel with cgroup v1 memory and "
                        "pids controllers and overlayfs", required=required)  # fmt: skip
    controllers = ", ".join(sorted(controller_mounts()))
    return _ok("cgroups + overlayfs", f"root; overlayfs; cgroup v1 controllers {controllers}")


def check_docker(settings: Settings) -> CheckRow:
    """The Docker engine answers (needed only when sandboxes run on the docker backend)."""
    from sandboxes import get_backend

    required = settings.sandbox_backend == "docker"
    backend = get_backend("docker", settings.sandbox_config())
    try:
        reason = backend.unavailable_reason()
        if reason:
            fix = "as root: `infra/docker/dockerd.sh start`" + ("" if required else " (for --backend docker)")
            return _missing("docker engine", reason, fix, required=required)
        version = backend.client.version().get("Version", "?")  # type: ignore[attr-defined]
        return _ok("docker engine", f"Docker {version} answers")
    finally:
        backend.close()


def check_base_image(settings: Settings) -> CheckRow:
    """The base image every task family runs on is recorded and its files (and docker image) exist."""
    from sandboxes import ImageStore, SandboxError, get_backend

    name = settings.sandbox_image
    store = ImageStore(settings.image_store)
    try:
        record = store.get(name)
    except SandboxError as exc:
        return _missing("base image", str(exc),
                        "`trajlake sandbox build-image` (or let `trajlake demo` build it)")  # fmt: skip
    reason = get_backend("local", settings.sandbox_config()).image_unavailable_reason(name)
    if reason:
        return _missing("base image", reason, "`trajlake sandbox build-image --force`")
    detail = f"{name}: rootfs sha256 {record.rootfs_sha256[:16]} in {store.root}"
    if settings.sandbox_backend == "docker":
        backend = get_backend("docker", settings.sandbox_config())
        try:
            reason = backend.image_unavailable_reason(name)
        finally:
            backend.close()
        if reason:
            return _missing("base image", reason, "`trajlake sandbox build-image`")
        detail += f"; docker image {record.image_id}"
    return _ok("base image", detail)


def check_broker(settings: Settings) -> CheckRow:
    """A broker answers at the bootstrap servers and holds trajlake's topics."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    from ingest.kafka_broker import require_broker

    try:
        require_broker(settings.kafka_bootstrap)
        admin = KafkaAdminClient(
            bootstrap_servers=settings.kafka_bootstrap.split(","), request_timeout_ms=10000,
            bootstrap_timeout_ms=10000,
        )  # fmt: skip
        try:
            topics = set(admin.list_topics())
        finally:
            admin.close()
    except (TrajlakeError, KafkaError, OSError) as exc:
        return _missing("kafka broker", str(exc).split(";")[0], "`trajlake up`")
    missing = sorted(set(settings.topics) - topics)
    if missing:
        return _missing("kafka broker", f"answers at {settings.kafka_bootstrap}; topics missing: "
                        f"{', '.join(missing)}", "`trajlake up` (creates the topics)")  # fmt: skip
    return _ok(
        "kafka broker", f"answers at {settings.kafka_bootstrap}; topics {', '.join(sorted(settings.topics))}"
    )


def check_disk(settings: Settings) -> CheckRow:
    """Free space under ``TRAJLAKE_HOME`` (or its nearest existing parent)."""
    where = Path(settings.home).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    detail = f"{free / (1 << 30):.1f} GiB free at {where}"
    if free < MIN_FREE_BYTES:
        return _missing("disk", detail, f"free at least {MIN_FREE_BYTES >> 30} GiB, or point TRAJLAKE_HOME "
                        "at a larger disk")  # fmt: skip
    return _ok("disk", detail)


def check_lake(settings: Settings) -> CheckRow:
    """Every table of the lake opens, its log has no gap and every file it names exists."""
    from lake import Lake
    from lake.check import REBUILD, check_lake

    root = Path(settings.lake)
    if not root.is_dir():
        return _ok("lake", f"none yet at {root} (the pipeline creates it)")
    checks = [c for c in check_lake(Lake(str(root))) if c.exists]
    broken = [f"{c.table} v{c.version}: {c.problems[0]}" for c in checks if not c.ok]
    if broken:
        return _missing(
            "lake", f"damaged: {'; '.join(broken)}", REBUILD.render() + " (then use --lake NEW_DIR)"
        )
    found = [f"{c.table} v{c.version}" for c in checks]
    return _ok("lake", f"{len(found)} tables at {root}" + (f": {', '.join(found)}" if found else ""))


CHECKS: tuple[Callable[..., CheckRow], ...] = (
    check_python, check_java, check_kafka_jars, check_bubblewrap, check_local_backend, check_docker,
    check_base_image, check_broker, check_disk, check_lake,
)  # fmt: skip
"""Every check, in the order the table shows them."""


def run_checks(settings: Settings, on_row: Callable[[CheckRow], None] | None = None) -> list[CheckRow]:
    """Run every check; a check that itself fails becomes a ``missing`` row naming the failure."""
    rows = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_").replace("_", " ")
        try:
            row = check(settings) if check.__code__.co_argcount else check()
        except Exception as exc:  # noqa: BLE001 - a broken probe is itself a finding, never a crash
            row = _missing(name, f"the check failed: {type(exc).__name__}: {exc}", "run with --debug")
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def as_json(rows: list[CheckRow]) -> dict[str, object]:
    """The rows and the overall answer, for ``--json``."""
    return {"ready": not any(r.status == "missing" for r in rows), "checks": [r.__dict__ for r in rows]}
