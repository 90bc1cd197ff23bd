"""The conformance suite every backend passes: behaviour and isolation, each an actual attempt.

Each check gets a fresh sandbox made from :data:`CONFORMANCE_SPEC` with a small
workspace template, does something (runs a command, tries to escape, exhausts
a resource) and verifies the outcome from the host's side too. The same checks
back ``trajlake sandbox selftest`` and the test suite.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sandboxes.errors import SandboxError, SandboxPathError, SnapshotNotFoundError
from sandboxes.interface import ExecResult, Sandbox, SandboxSpec
from sandboxes.registry import SandboxBackend

CONFORMANCE_SPEC = SandboxSpec(
    memory_mb=256, pids=64, cpus=1.0, disk_mb=64, tmp_mb=16, max_files=4096, exec_timeout_s=30,
    output_limit_bytes=1 << 20,
)  # fmt: skip
"""Limits small enough that every exhaustion check finishes in seconds."""

TEMPLATE = {
    "hello.txt": "hello from the template\n",
    "src/mod.py": "def answer():\n    return 42\n",
    "data/keep.csv": "a,b\n1,2\n",
}


class CheckFailed(AssertionError):
    """A conformance check saw the wrong outcome."""


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check on one backend."""

    name: str
    passed: bool
    detail: str
    duration_s: float


@dataclass
class CheckContext:
    """What a check may use besides its sandbox."""

    spec: SandboxSpec
    host_dir: Path
    """A private host directory (outside every sandbox) for markers."""


def expect(cond: bool, message: str, result: ExecResult | None = None) -> None:
    """Fail the check with ``message`` (and the command's output) unless ``cond``."""
    if not cond:
        if result is not None:
            message += (
                f" [exit={result.exit_code} timed_out={result.timed_out} oom={result.oom_killed} "
                f"stdout={result.stdout[-300:]!r} stderr={result.stderr[-300:]!r}]"
            )
        raise CheckFailed(message)


def _host_processes() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def _host_can_fork() -> bool:
    import subprocess

    return subprocess.run(["true"], timeout=10).returncode == 0


# --------------------------------------------------------------- behaviour


def check_exec(sb: Sandbox, ctx: CheckContext) -> str:
    """A command runs, its output and exit code come back."""
    r = sb.exec(["python3", "-c", "print(1)"])
    expect(r.exit_code == 0 and r.stdout == "1\n" and not r.timed_out, "python3 -c 'print(1)'", r)
    r = sb.exec("echo out; echo err >&2")
    expect((r.stdout, r.stderr) == ("out\n", "err\n"), "stdout and stderr kept apart", r)
    return f"python3 ran in {r.duration_s * 1000:.0f} ms"


def check_exit_codes(sb: Sandbox, ctx: CheckContext) -> str:
    """Non-zero exits, signals and missing commands are data, not exceptions."""
    codes = {}
    for cmd, want in (("exit 3", 3), ("kill -9 $$", 137), ("no-such-command-xyz", 127), ("true", 0)):
        r = sb.exec(cmd)
        codes[cmd] = r.exit_code
        expect(r.exit_code == want, f"{cmd!r} should exit {want}", r)
    return ", ".join(f"{c!r}->{v}" for c, v in codes.items())


def check_stdin_env_cwd(sb: Sandbox, ctx: CheckContext) -> str:
    """stdin, environment and working directory reach the command."""
    r = sb.exec(["cat"], stdin=b"piped input")
    expect(r.stdout == "piped input", "stdin reaches the command", r)
    r = sb.exec("echo $GREETING", env={"GREETING": "hi there"})
    expect(r.stdout == "hi there\n", "env reaches the command", r)
    r = sb.exec("pwd; ls", cwd="src")
    expect(r.stdout.splitlines()[:2] == ["/workspace/src", "mod.py"], "cwd under the workspace", r)
    return "stdin, env and cwd passed through"


def check_timeout(sb: Sandbox, ctx: CheckContext) -> str:
    """A command past its timeout is killed with everything it started."""
    count = "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$' || true"
    before = sb.exec(count).stdout.strip()
    r = sb.exec("sleep 300 & sleep 300 & (setsid sleep 300 &); sleep 300", timeout=1.5)
    expect(r.timed_out and r.exit_code != 0, "sleep past the timeout is reported timed out", r)
    expect(r.duration_s < 15, f"killed promptly, took {r.duration_s:.1f}s", r)
    left = sb.exec(count)
    expect(left.stdout.strip() == before, f"no sleep survives the timeout (before: {before})", left)
    return f"killed after {r.duration_s:.2f}s, no survivors"


def check_runaway_cpu(sb: Sandbox, ctx: CheckContext) -> str:
    """A busy loop is killed at the timeout."""
    r = sb.exec(["python3", "-c", "while True: pass"], timeout=2)
    expect(r.timed_out, "busy loop reported timed out", r)
    expect(r.duration_s < 15, f"killed promptly, took {r.duration_s:.1f}s", r)
    after = sb.exec("echo alive")
    expect(after.stdout == "alive\n", "sandbox usable afterwards", after)
    cpu = r.usage.cpu_s if r.usage else None
    return f"killed at {r.duration_s:.2f}s" + (f" after {cpu:.2f} CPU s" if cpu is not None else "")


def check_huge_output(sb: Sandbox, ctx: CheckContext) -> str:
    """Output beyond the limit is cut and flagged, and the full size is counted."""
    size = 20 << 20
    r = sb.exec(f"head -c {size} /dev/zero | tr '\\0' x")
    limit = ctx.spec.output_limit_bytes
    expect(r.exit_code == 0, "the command itself succeeds", r)
    expect(r.truncated, "flagged truncated", r)
    expect(len(r.stdout.encode()) <= limit, f"kept at most {limit} bytes, kept {len(r.stdout)}")
    expect(r.stdout_bytes == size, f"counted {r.stdout_bytes} bytes, wrote {size}")
    return f"{r.stdout_bytes >> 20} MiB written, {len(r.stdout) >> 10} KiB kept"


def check_file_io(sb: Sandbox, ctx: CheckContext) -> str:
    """Files written from the host are the agent's; files the agent writes read back; links stay in."""
    expect(sb.read_file("hello.txt") == TEMPLATE["hello.txt"].encode(), "template file readable")
    sb.write_file("new/dir/f.txt", "from host\n")
    r = sb.exec("cat new/dir/f.txt && echo more >> new/dir/f.txt && stat -c %u new/dir/f.txt")
    expect(r.exit_code == 0 and r.stdout.startswith("from host"), "host-written file visible", r)
    expect(r.stdout.split()[-1] == "1000", "host-written file owned by the agent (uid 1000)", r)
    expect(sb.read_file("/workspace/new/dir/f.txt") == b"from host\nmore\n", "agent's append visible")
    for bad in ("../etc/passwd", "/etc/passwd", "/workspace/../etc/passwd"):
        try:
            sb.read_file(bad)
        except SandboxPathError:
            continue
        raise CheckFailed(f"read_file({bad!r}) was not refused")
    sb.exec("ln -s /etc/shadow shadow-link; ln -s /etc linkdir")
    for bad in ("shadow-link", "linkdir/passwd"):
        try:
            sb.read_file(bad)
        except SandboxPathError:
            continue
        raise CheckFailed(f"read_file({bad!r}) followed a symlink out of the workspace")
    try:
        sb.write_file("linkdir/evil", "x")
        raise CheckFailed("write_file through a symlinked directory was not refused")
    except SandboxPathError:
        pass
    expect(not Path("/etc/evil").exists(), "nothing written to the host's /etc")
    return "read/write, ownership, path and symlink escapes refused"


def check_snapshot_restore(sb: Sandbox, ctx: CheckContext) -> str:
    """Snapshot, change, restore gives back exactly the snapshotted state."""
    sb.exec("echo one > a.txt")
    ref1 = sb.snapshot()
    sb.exec("echo two > a.txt; rm hello.txt; mkdir -p d && echo new > d/b.txt")
    ref2 = sb.snapshot()
    sb.exec("echo three > a.txt; rm -r d src")
    sb.restore(ref1)
    r = sb.exec("cat a.txt; ls")
    expect(r.stdout.split() == ["one", "a.txt", "data", "hello.txt", "src"], "back at the first snapshot", r)
    sb.restore(ref2)
    r = sb.exec("cat a.txt d/b.txt; ls")
    expect(r.stdout.split() == ["two", "new", "a.txt", "d", "data", "src"], "back at the second snapshot", r)
    sb.restore(ref1)
    expect(sb.read_file("a.txt") == b"one\n", "restoring an older snapshot again works")
    return f"{ref1}, {ref2} restored in both orders"


def check_tmp_persists(sb: Sandbox, ctx: CheckContext) -> str:
    """``/tmp`` keeps its files from one command to the next, and reset empties it."""
    sb.exec("echo kept > /tmp/note.txt")
    r = sb.exec("cat /tmp/note.txt")
    expect(r.stdout == "kept\n", "/tmp survives between commands", r)
    sb.reset()
    r = sb.exec("ls -A /tmp")
    expect(r.stdout == "", "/tmp is empty after reset", r)
    return "kept across commands, emptied by reset"


def check_export_workspace(sb: Sandbox, ctx: CheckContext) -> str:
    """The final-state archive is deterministic, complete, and keeps the agent's links as links."""
    import tempfile

    from sandboxes.workspace_io import extract_archive

    r = sb.exec("mkdir -p out && echo result > out/r.txt && chmod 750 out && ln -sf /etc/shadow leak")
    expect(r.exit_code == 0, "set up files to archive", r)
    first, second = sb.export_workspace(), sb.export_workspace()
    expect(first == second, "two archives of the same workspace are identical bytes")
    with tempfile.TemporaryDirectory(prefix="trajlake-export-") as tmp:
        dest = Path(tmp) / "ws"
        extract_archive(first, dest)
        expect((dest / "out" / "r.txt").read_text() == "result\n", "a written file is in the archive")
        expect((dest / "src" / "mod.py").is_file(), "template files are in the archive")
        expect((dest / "leak").is_symlink(), "a link is archived as a link")
        expect(os.readlink(dest / "leak") == "/etc/shadow", "the link's target is kept, not followed")
    return f"{len(first)} bytes, identical twice, links kept as links"


def check_reset(sb: Sandbox, ctx: CheckContext) -> str:
    """Reset returns to the template and drops snapshots."""
    ref = sb.snapshot()
    sb.exec("rm -r src; echo junk > junk.txt; echo changed > hello.txt")
    sb.reset()
    r = sb.exec("ls -R | sort; cat hello.txt")
    expect("junk.txt" not in r.stdout and "mod.py" in r.stdout, "template restored", r)
    expect(r.stdout.endswith(TEMPLATE["hello.txt"]), "template contents restored", r)
    try:
        sb.restore(ref)
        raise CheckFailed("a snapshot taken before reset could still be restored")
    except SnapshotNotFoundError:
        pass
    return "template back, old snapshot refused"


# --------------------------------------------------------------- isolation


def check_network(sb: Sandbox, ctx: CheckContext) -> str:
    """A listener on the host's 127.0.0.1 cannot be reached; nothing outside either."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, peer = srv.accept()
                accepted.append(peer)
                conn.close()
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        code = (
            "import socket\n"
            "res = []\n"
            f"for host, port in (('127.0.0.1', {port}), ('1.1.1.1', 53), ('10.0.0.1', 80)):\n"
            "    s = socket.socket(); s.settimeout(2)\n"
            "    try:\n"
            "        s.connect((host, port)); res.append('CONNECTED')\n"
            "    except OSError as e:\n"
            "        res.append(type(e).__name__)\n"
            "print(' '.join(res))\n"
        )
        r = sb.exec(["python3", "-c", code], timeout=20)
    finally:
        stop.set()
        t.join(2)
        srv.close()
    expect(r.exit_code == 0 and "CONNECTED" not in r.stdout, "no connection succeeds", r)
    expect(not accepted, f"the host listener accepted {accepted}")
    return f"connect attempts failed: {r.stdout.strip()}"


def check_network_observed(sb: Sandbox, ctx: CheckContext) -> str:
    """Attempts to reach a network are refused at once and seen by the host, whatever sends them.

    The sandbox's own processes can neither change the watch nor hide from it, and a
    reset forgets what was seen.
    """
    code = (
        "import socket, time\n"
        "t = time.monotonic()\n"
        "for host, port in (('203.0.113.7', 8443), ('2001:db8::7', 22)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=10); print('CONNECTED')\n"
        "    except OSError:\n"
        "        pass\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "try:\n"
        "    u.sendto(b'x', ('198.51.100.7', 5353))\n"
        "except OSError:\n"
        "    pass\n"
        "print(f'took {time.monotonic() - t:.1f}')\n"
    )
    before = sb.network_report()
    expect(before is not None, "the backend observes the sandbox's network")
    assert before is not None
    expect(not before.attempted, f"a new sandbox has seen nothing, saw {before.describe()}")
    r = sb.exec(["python3", "-c", code], timeout=30)
    expect(r.exit_code == 0 and "CONNECTED" not in r.stdout, "no connection succeeds", r)
    took = float(r.stdout.split("took")[-1]) if "took" in r.stdout else 99.0
    expect(took < 8, f"attempts are refused at once, not left to time out (took {took:.1f}s)", r)
    # the sandbox's processes cannot undo the watch (no capability in the namespace)
    sb.exec("nft flush ruleset; ip link del tlw0; ip route flush table main", timeout=20)
    seen = sb.network_report()
    assert seen is not None
    for dest in ("tcp 203.0.113.7:8443", "udp 198.51.100.7:5353"):
        expect(dest in seen.destinations, f"{dest} observed, saw {seen.describe()}")
    sb.reset()
    after = sb.network_report()
    expect(after is not None and not after.attempted, "a reset forgets what was seen")
    return f"observed: {seen.describe()}"


def check_host_files(sb: Sandbox, ctx: CheckContext) -> str:
    """Host files outside the workspace can be neither read nor written."""
    marker = ctx.host_dir / "marker.txt"
    marker.write_text("host-secret-4f1c\n")
    os.chmod(ctx.host_dir, 0o755)
    os.chmod(marker, 0o644)  # readable by anyone on the host: only the sandbox's view protects it
    r = sb.exec(f"cat {marker}; cat /etc/shadow; ls {ctx.host_dir}")
    expect("host-secret-4f1c" not in r.stdout, "host marker file not readable", r)
    expect("root:" not in r.stdout, "/etc/shadow not readable", r)
    targets = [
        ctx.host_dir / "written-by-sandbox",
        Path("/etc/trajlake-sandbox-test"),
        Path("/usr/trajlake-test"),
    ]
    r = sb.exec("; ".join(f"echo x > {p}" for p in targets) + "; true")
    for p in targets:
        expect(not p.exists(), f"sandbox created host file {p}", r)
    expect(marker.read_text() == "host-secret-4f1c\n", "host marker unchanged")
    return "host marker, /etc/shadow unreadable; /etc, /usr, host dirs unwritable"


def check_privileges(sb: Sandbox, ctx: CheckContext) -> str:
    """The agent is not root and holds no capabilities."""
    r = sb.exec("id -u; grep -E '^(CapEff|CapPrm|CapAmb)' /proc/self/status")
    lines = r.stdout.split("\n")
    expect(r.exit_code == 0 and lines[0] != "0", "uid is not 0", r)
    caps = {ln.split(":")[0]: ln.split()[1] for ln in lines[1:] if ":" in ln}
    expect(all(int(v, 16) == 0 for v in caps.values()) and len(caps) == 3, f"no capabilities: {caps}", r)
    r2 = sb.exec("mount -t tmpfs none /tmp 2>&1; unshare -U true 2>&1; echo done")
    expect("done" in r2.stdout, "probe ran", r2)
    return f"uid {lines[0]}, CapEff {caps.get('CapEff')}"


def check_rlimits(sb: Sandbox, ctx: CheckContext) -> str:
    """Open files and file size are capped by rlimits in every process."""
    r = sb.exec("ulimit -n")
    expect(r.stdout.strip() == str(ctx.spec.open_files), f"open files limited to {ctx.spec.open_files}", r)
    code = (
        "import os, resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
        "print(soft, hard, resource.getrlimit(resource.RLIMIT_CORE)[1])\n"
    )
    r = sb.exec(["python3", "-c", code])
    fsize = (ctx.spec.file_size_mb or ctx.spec.disk_mb) << 20
    expect(r.stdout.split() == [str(fsize), str(fsize), "0"], f"file size {fsize}, no core dumps", r)
    return f"nofile {ctx.spec.open_files}, fsize {fsize >> 20} MiB, core 0"


def check_fork_bomb(sb: Sandbox, ctx: CheckContext) -> str:
    """A fork bomb is contained by the pids limit; the host is unaffected."""
    before = _host_processes()
    r = sb.exec("bomb() { bomb | bomb & }; bomb; sleep 3", timeout=6)
    expect(_host_can_fork(), "the host can still start processes")
    after = _host_processes()
    expect(after - before < 50, f"host process count grew from {before} to {after}")
    ok = sb.exec("echo survived")
    expect(ok.stdout == "survived\n", "sandbox usable after the bomb", ok)
    return (
        f"contained ({'timed out' if r.timed_out else f'exit {r.exit_code}'}), host {before}->{after} procs"
    )


def check_memory_bomb(sb: Sandbox, ctx: CheckContext) -> str:
    """Allocating past the memory limit gets the command killed; the host is unaffected."""
    want_mb = ctx.spec.memory_mb * 3
    code = f"b = []\nfor _ in range({want_mb}):\n    b.append(bytearray(1 << 20))\nprint('ALLOCATED')"
    r = sb.exec(["python3", "-c", code], timeout=60)
    expect("ALLOCATED" not in r.stdout, f"allocated {want_mb} MiB under a {ctx.spec.memory_mb} MiB limit", r)
    expect(r.exit_code != 0, "the allocation failed", r)
    expect(_host_can_fork(), "the host is fine")
    ok = sb.exec("echo survived")
    expect(ok.stdout == "survived\n", "sandbox usable afterwards", ok)
    return f"killed (exit {r.exit_code}, oom_killed={r.oom_killed})"


def check_disk_fill(sb: Sandbox, ctx: CheckContext) -> str:
    """Filling the workspace or /tmp stops at the bound."""
    bound = ctx.spec.disk_mb << 20
    r = sb.exec(f"dd if=/dev/zero of=big bs=1M count={ctx.spec.disk_mb * 4} 2>&1; stat -c %s big", timeout=60)
    size = int(r.stdout.split()[-1]) if r.stdout.split() and r.stdout.split()[-1].isdigit() else -1
    expect(0 <= size <= bound, f"workspace file grew to {size} bytes, bound {bound}", r)
    # many small files: the loop must end because a write failed, not at its own cap
    cap = 200_000
    loop = (
        f"rm -f big; i=0; while echo x > many-$i 2>/dev/null; do i=$((i+1)); [ $i -ge {cap} ] && break; done"
    )
    r2 = sb.exec(loop + "; echo files=$i", timeout=120)
    files = int(r2.stdout.split("files=")[-1]) if "files=" in r2.stdout else -1
    expect(0 < files < cap, f"small files stopped by the bound ({files} written)", r2)
    tmp_bound = ctx.spec.tmp_mb << 20
    r3 = sb.exec(
        f"dd if=/dev/zero of=/tmp/big bs=1M count={ctx.spec.tmp_mb * 4} 2>/dev/null; stat -c %s /tmp/big"
    )
    tsize = int(r3.stdout.split()[-1]) if r3.stdout.split() else -1
    expect(0 <= tsize <= tmp_bound, f"/tmp file grew to {tsize} bytes, bound {tmp_bound}", r3)
    sb.reset()
    ok = sb.exec("echo fine > after.txt && cat after.txt")
    expect(ok.stdout == "fine\n", "workspace usable after reset", ok)
    return f"workspace stopped at {size >> 20} MiB or {files} small files, /tmp at {tsize >> 20} MiB"


def check_entry_fill(sb: Sandbox, ctx: CheckContext) -> str:
    """Empty directories and files (no bytes at all) stop at ``max_files``, in the workspace and /tmp."""
    code = (
        "import os, sys\n"
        "base, i = sys.argv[1], 0\n"
        "try:\n"
        "    while i < 200000:\n"
        "        os.mkdir(os.path.join(base, f'd{i}')); i += 1\n"
        "except OSError as e:\n"
        "    print('errno', e.errno)\n"
        "print('made', i)\n"
    )
    made = {}
    for where in ("/workspace/many", "/tmp/many"):
        r = sb.exec(["sh", "-c", f'mkdir -p {where} && python3 -c "$0" {where}', code], timeout=120)
        n = int(r.stdout.split("made")[-1]) if "made" in r.stdout else -1
        expect(0 < n <= ctx.spec.max_files, f"{where}: entries stopped by the bound ({n} made)", r)
        made[where] = n
    exported = sb.export_workspace()
    expect(len(exported) > 0, "a workspace at its entry bound can still be exported")
    sb.reset()
    ok = sb.exec("echo fine > after.txt && cat after.txt")
    expect(ok.stdout == "fine\n", "workspace usable after reset", ok)
    return ", ".join(f"{w}: {n} entries" for w, n in made.items())


CHECKS: dict[str, Callable[[Sandbox, CheckContext], str]] = {
    "exec": check_exec,
    "exit_codes": check_exit_codes,
    "stdin_env_cwd": check_stdin_env_cwd,
    "timeout": check_timeout,
    "runaway_cpu": check_runaway_cpu,
    "huge_output": check_huge_output,
    "file_io": check_file_io,
    "snapshot_restore": check_snapshot_restore,
    "export_workspace": check_export_workspace,
    "reset": check_reset,
    "tmp_persists": check_tmp_persists,
    "network": check_network,
    "network_observed": check_network_observed,
    "host_files": check_host_files,
    "privileges": check_privileges,
    "rlimits": check_rlimits,
    "fork_bomb": check_fork_bomb,
    "memory_bomb": check_memory_bomb,
    "disk_fill": check_disk_fill,
    "entry_fill": check_entry_fill,
}
"""Every conformance check, by name, in the order the selftest runs them."""


@contextmanager
def template_dir() -> Iterator[Path]:
    """A temporary workspace template with :data:`TEMPLATE`'s files."""
    with tempfile.TemporaryDirectory(prefix="trajlake-template-") as tmp:
        root = Path(tmp)
        for rel, text in TEMPLATE.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        yield root


def run_check(
    backend: SandboxBackend, name: str, *, image: str | None = None, spec: SandboxSpec | None = None
) -> CheckResult:
    """Run one check in a fresh sandbox; a failed expectation or any error fails it."""
    check = CHECKS[name]
    base = (spec or CONFORMANCE_SPEC).with_(image=image)
    start = time.monotonic()
    with template_dir() as tpl, tempfile.TemporaryDirectory(prefix="trajlake-host-") as host:
        spec_ = base.with_(workspace=tpl)
        try:
            with backend.create(spec_) as sb:
                detail = check(sb, CheckContext(spec=spec_, host_dir=Path(host)))
            return CheckResult(name, True, detail, time.monotonic() - start)
        except (CheckFailed, SandboxError) as exc:
            return CheckResult(name, False, f"{type(exc).__name__}: {exc}", time.monotonic() - start)


def run_conformance(
    backend: SandboxBackend,
    *,
    image: str | None = None,
    names: list[str] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run the checks (all by default) against a backend, one fresh sandbox each."""
    results = []
    for name in names or list(CHECKS):
        res = run_check(backend, name, image=image)
        results.append(res)
        if on_result:
            on_result(res)
    return results
