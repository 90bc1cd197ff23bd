"""Final-state archives: deterministic on the way out, untrusted on the way in."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from sandboxes.errors import SandboxPathError, SandboxQuotaError
from sandboxes.workspace_io import MAX_ARCHIVE_DEPTH, archive_tree, extract_archive


def _tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("/etc/shadow", root / "leak")
    os.symlink("pkg/mod.py", root / "alias.py")
    os.mkfifo(root / "pipe")


def test_archive_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _tree(a)
    _tree(b)
    os.utime(b / "pkg" / "mod.py", (1, 1))  # times and inode order do not matter
    data = archive_tree(a, max_bytes=1 << 20)
    assert data == archive_tree(b, max_bytes=1 << 20)
    out = tmp_path / "out"
    extract_archive(data, out)
    assert (out / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert os.access(out / "run.sh", os.X_OK)
    assert os.readlink(out / "leak") == "/etc/shadow"  # kept as a link, never followed on the host
    assert os.readlink(out / "alias.py") == "pkg/mod.py"
    assert not (out / "pipe").exists()  # fifos are not workspace content
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getnames() == sorted(tar.getnames())
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_archive_over_the_bound_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(os.urandom(200_000))
    with pytest.raises(SandboxQuotaError):
        archive_tree(tmp_path, max_bytes=100_000)


def _evil(*members: tuple[str, str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, arg in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, arg
                tar.addfile(info)
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, arg
                tar.addfile(info)
            else:
                info.size = len(arg)
                tar.addfile(info, io.BytesIO(arg.encode()))
    return buf.getvalue()


@pytest.mark.parametrize(
    "members",
    [
        [("../escape.txt", "file", "x")],
        [("/abs.txt", "file", "x")],
        [("d", "link", "/tmp"), ("d/planted.txt", "file", "x")],
        [("f", "link", "/tmp/planted.txt"), ("f", "file", "x")],
        [("h", "hard", "/etc/passwd")],
    ],
    ids=["dotdot", "absolute", "through-link", "replace-link", "hardlink"],
)
def test_hostile_archives_cannot_write_outside(tmp_path: Path, members: list[tuple[str, str, str]]) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(SandboxPathError):
        extract_archive(_evil(*members), dest)
    assert not (tmp_path / "escape.txt").exists()
    assert not Path("/tmp/planted.txt").exists()


def test_a_tree_nested_too_deep_is_refused_not_recursed(tmp_path: Path) -> None:
    deep = tmp_path / "ws"
    (deep / "/".join(["d"] * (MAX_ARCHIVE_DEPTH + 1))).mkdir(parents=True)
    with pytest.raises(SandboxQuotaError, match="nests over"):
        archive_tree(deep, max_bytes=1 << 20)
    (tmp_path / "ok" / "/".join(["d"] * MAX_ARCHIVE_DEPTH)).mkdir(parents=True)
    assert archive_tree(tmp_path / "ok", max_bytes=1 << 20)


def _chain(root: Path, depth: int) -> None:
    """A directory chain ``depth`` deep under ``root``, built without paths longer than the kernel takes."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


def test_trees_deeper_than_pythons_recursion_are_removed(tmp_path: Path) -> None:
    from sandboxes.workspace_io import clear_dir, remove_tree

    # an agent nests thousands of directories: shutil.rmtree would die at the recursion limit
    (tmp_path / "a").mkdir()
    _chain(tmp_path / "a", 3000)
    (tmp_path / "b").mkdir()
    _chain(tmp_path / "b", 1500)
    (tmp_path / "keep.txt").write_text("x")
    remove_tree(tmp_path / "a")
    assert not (tmp_path / "a").exists()
    clear_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []
