"""Backend behaviour beyond the conformance suite: cleanup, errors, quotas, images, events."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sandboxes import (
    ImageDriftError,
    ImageStore,
    SandboxBackend,
    SandboxClosedError,
    SandboxConfig,
    SandboxError,
    SandboxPathError,
    SandboxQuotaError,
    SandboxSpec,
    SandboxUnavailableError,
    build_image,
    get_backend,
)
from sandboxes.interface import workspace_relpath
from sandboxes.local import MAX_LAYERS
from schemas.events import SandboxPayload

SMALL = SandboxSpec(memory_mb=256, pids=64, disk_mb=16, tmp_mb=8, exec_timeout_s=30)


def _mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


def test_close_frees_everything(backend: SandboxBackend) -> None:
    sb = backend.create(SMALL)
    sb.exec("echo x > f")
    runtime = sb.dir  # type: ignore[attr-defined]
    assert str(runtime) in _mounts()
    cgroups = list(sb._cgroup.dirs.values())  # type: ignore[attr-defined]
    container = getattr(sb, "container_id", None)
    sb.close()
    sb.close()  # idempotent
    assert not runtime.exists()
    assert str(runtime) not in _mounts()
    if backend.name == "local":
        assert cgroups and not any(d.exists() for d in cgroups)
    else:
        import docker

        client = docker.from_env()
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(container)
        client.close()
    with pytest.raises(SandboxClosedError):
        sb.exec("true")
    assert not sb.is_alive()


def test_lifecycle_steps_reach_the_listener(backend: SandboxBackend) -> None:
    events: list[SandboxPayload] = []
    with backend.create(SMALL) as sb:
        sb.listener = events.append
        sb.exec("echo a > a")
        ref = sb.snapshot()
        sb.restore(ref)
        sb.reset()
    assert [e.action for e in events] == ["snapshot", "restore", "reset", "destroyed"]
    assert events[0].snapshot_ref == ref == events[1].snapshot_ref
    assert {e.backend for e in events} == {backend.name} and {e.sandbox_id for e in events} == {sb.id}


def test_usage_is_measured(backend: SandboxBackend) -> None:
    with backend.create(SMALL) as sb:
        r = sb.exec(
            [
                "python3",
                "-c",
                # half a second of CPU, however long that takes on a loaded machine
                "import time\nt=time.process_time()\nx=bytearray(50<<20)\n"
                "while time.process_time()-t<0.5: pass",
            ]
        )
    assert r.exit_code == 0 and r.usage is not None
    assert r.usage.cpu_s is not None and r.usage.cpu_s >= 0.3
    assert r.usage.max_rss_bytes is not None and r.usage.max_rss_bytes >= 50 << 20


def test_write_file_past_the_disk_bound_is_a_quota_error(backend: SandboxBackend) -> None:
    with backend.create(SMALL) as sb:
        with pytest.raises(SandboxQuotaError):
            sb.write_file("big.bin", b"\0" * (SMALL.disk_mb + 4 << 20))
        sb.write_file("small.txt", "still fine")  # the failed write left nothing behind
        assert sb.exec("cat small.txt; ls -a").stdout == "still fine.\n..\nsmall.txt\n"


def test_reset_to_a_new_template(backend: SandboxBackend, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "a.txt").write_text("A")
    (b / "sub").mkdir()
    (b / "sub" / "b.txt").write_text("B")
    with backend.create(SMALL.with_(workspace=a)) as sb:
        sb.exec("echo changed > a.txt")
        sb.reset(workspace=b)
        assert sb.exec("find . -type f | sort").stdout == "./sub/b.txt\n"
        sb.reset()
        assert sb.exec("cat sub/b.txt").stdout == "B"
        # the sandbox keeps its own copy: the caller's template may go away after the reset
        shutil.rmtree(b)
        sb.exec("rm -rf sub && touch junk")
        sb.reset()
        assert sb.exec("find . -type f | sort").stdout == "./sub/b.txt\n"


def test_a_reset_of_an_unchanged_sandbox_is_recorded_but_not_redone(
    backend: SandboxBackend, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("A")
    events: list[SandboxPayload] = []
    with backend.create(SMALL.with_(workspace=tmp_path)) as sb:
        sb.listener = events.append
        sb.reset()
        redone = sb._reset  # type: ignore[attr-defined]
        calls: list[object] = []
        sb._reset = lambda w: (calls.append(w), redone(w))[1]  # type: ignore[method-assign]
        sb.reset()  # nothing ran since: done already
        sb.reset(workspace=tmp_path)
        assert calls == [] and [e.action for e in events] == ["reset"] * 3
        assert "unchanged since its last reset" in (events[-1].detail or "")
        for change in (lambda: sb.exec("true"), lambda: sb.write_file("b.txt", "B"), lambda: sb.snapshot()):
            change()
            sb.reset()  # anything that ran or changed makes the next reset real
        assert len(calls) == 3
        sb.exec("echo changed > a.txt && touch junk")
        sb.reset()
        assert sb.exec("ls; cat a.txt").stdout == "a.txt\nA"
        sb.reset()  # after the look above
        sb.check_health()  # the probe changes nothing
        sb.reset()
        assert len(calls) == 5


def test_local_snapshot_depth_is_bounded(local_backend: SandboxBackend) -> None:
    with local_backend.create(SMALL) as sb:
        for i in range(MAX_LAYERS):
            sb.write_file(f"f{i}", str(i))
            sb.snapshot()
        sb.write_file("one-too-many", "x")
        with pytest.raises(SandboxQuotaError, match="nested snapshots"):
            sb.snapshot()
        assert sb.exec("ls | wc -l").stdout.strip() == str(MAX_LAYERS + 1)
        sb.reset()  # drops every layer
        assert sb.exec("ls | wc -l").stdout.strip() == "0"


def test_unchanged_workspace_snapshot_adds_no_layer(local_backend: SandboxBackend) -> None:
    with local_backend.create(SMALL) as sb:
        sb.write_file("a", "1")
        ref1 = sb.snapshot()
        ref2 = sb.snapshot()
        assert ref1 != ref2
        assert sb._layers == ["0"]  # type: ignore[attr-defined]


def test_unknown_backend_and_unknown_image(sandbox_config: SandboxConfig, reachable_tmp: Path) -> None:
    with pytest.raises(SandboxError, match="unknown sandbox backend 'nope'"):
        get_backend("nope", sandbox_config)
    cfg = SandboxConfig(runtime_dir=sandbox_config.runtime_dir, image_store=reachable_tmp / "empty-store")
    with pytest.raises(SandboxUnavailableError, match="is not built yet") as err:
        get_backend("local", cfg).create(SMALL.with_(image="not-built"))
    assert err.value.fix is not None and err.value.fix.command == ("sandbox", "build-image")
    assert "`trajlake sandbox build-image`" in err.value.explained()


def test_image_drift_is_detected(docker_backend: SandboxBackend, base_image: str, tmp_path: Path) -> None:
    """The tag of a pinned image now names another image: refuse to run anything."""
    real = ImageStore(docker_backend.config.image_store).get(base_image)
    store = tmp_path / "store"
    store.mkdir()
    drifted = {**real.__dict__, "image_id": "sha256:" + "0" * 64}  # what was pinned is gone
    (store / "images.json").write_text(json.dumps({base_image: drifted}))
    cfg = SandboxConfig(runtime_dir=docker_backend.config.runtime_dir, image_store=store)
    with pytest.raises(ImageDriftError, match="pinned to sha256:0000"):
        get_backend("docker", cfg).create(SMALL)


def test_build_image_is_a_no_op_when_recorded(docker_backend: SandboxBackend, base_image: str) -> None:
    import docker

    client = docker.from_env()
    record, built = build_image(
        ImageStore(docker_backend.config.image_store), name=base_image, docker_client=client
    )
    image = client.images.get(record.image_id)
    client.close()
    assert not built
    assert image.attrs["RootFS"]["Layers"] == [f"sha256:{record.rootfs_sha256}"]


@pytest.mark.parametrize(
    ("path", "rel"),
    [("a.txt", "a.txt"), ("/workspace/a/b", "a/b"), ("/workspace", "."), ("a/../b", "b"), ("./x/", "x")],
)
def test_workspace_paths(path: str, rel: str) -> None:
    assert workspace_relpath(path) == rel


@pytest.mark.parametrize(
    "path", ["../x", "/etc/passwd", "/workspace/../etc", "a/../../b", "/workspacex/y", ""]
)
def test_paths_outside_the_workspace_are_refused(path: str) -> None:
    with pytest.raises(SandboxPathError):
        workspace_relpath(path)


def test_local_backend_explains_why_it_cannot_run(
    sandbox_config: SandboxConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = get_backend("local", sandbox_config)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in (backend.unavailable_reason() or "")
    with pytest.raises(SandboxUnavailableError, match="needs root"):
        backend.create(SMALL)
