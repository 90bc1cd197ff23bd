"""The judged tree: what every judge reads is what the judge runs, and workspace faults are never ``error``.

The first half reads archives built here (no sandbox): links resolved inside the workspace or
refused, caches left out, limits. The second half judges real sandboxes the way a rollout does:
each cause of a workspace the judge cannot take in (paths, sizes, names, encodings, permissions,
links, entry counts, code nested to break a parser) is a ``fail`` with a flag, never ``error``;
and code the judge never read (a package swapped for a link into ``/tmp``, a module in ``/tmp``
put on the path at import, code hidden in a cache directory) is not what the tests get.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from judges import JudgeContext, build_judge, load_task
from judges.errors import WorkspaceUnjudgeable
from judges.final_state import FILE_LIMIT, PATH_LIMIT, read_archive
from judges.judgement import Judgement
from judges.replay import replay
from sandboxes import SandboxBackend, SandboxSpec
from sandboxes.workspace_io import archive_tree

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _tar(entries: list[tuple[str, str, bytes | str]]) -> bytes:
    """An archive of (kind, name, data-or-link-target) entries, as archive_tree writes them."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, name, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = str(data)
                tar.addfile(info)
            else:
                raw = data.encode() if isinstance(data, str) else data
                info.size = len(raw)
                info.mode = 0o000 if kind == "locked" else 0o644
                tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def test_links_inside_the_workspace_become_copies() -> None:
    state = read_archive(_tar([
        ("dir", "src", ""), ("dir", "src/pkg", ""), ("file", "src/pkg/__init__.py", "X = 1\n"),
        ("file", "notes.txt", "n"), ("link", "pkg", "src/pkg"), ("link", "alias.txt", "/workspace/notes.txt"),
        ("link", "chain.txt", "alias.txt"),
    ]))  # fmt: skip
    assert state.files["pkg/__init__.py"] == b"X = 1\n"  # a package dir behind a link: its files, copied
    assert state.files["alias.txt"] == state.files["chain.txt"] == b"n"
    assert set(state.links) == {"pkg", "alias.txt", "chain.txt"} and "pkg" in state.dirs


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("/tmp/pkg", "leads out of the workspace"),
        ("../../etc", "leads out of the workspace"),
        ("missing/file.py", "names nothing"),
        ("loop", "a loop of links"),
        (".", "names a directory that holds it"),
        (".git/objects", "names nothing"),  # what the judge leaves out is out for links too
    ],
)
def test_links_out_nowhere_or_round_are_refused(target: str, why: str) -> None:
    with pytest.raises(WorkspaceUnjudgeable, match=why) as err:
        read_archive(_tar([("dir", ".git", ""), ("dir", ".git/objects", ""), ("file", ".git/objects/ab", "z"),
                           ("link", "loop", "loop"), ("link", "pkg", target)]))  # fmt: skip
    assert err.value.kind == "links_out_of_workspace"


def test_caches_and_reserved_names_are_out_of_the_tree_for_every_judge() -> None:
    state = read_archive(
        _tar([
            ("file", "pkg/__pycache__/fix.py", "def f(): return 1\n"), ("file", "pkg/.git/x.py", "y"),
            ("file", ".pytest_cache/v", "z"), ("file", "tests_hidden/test_x.py", "t"),
            ("file", ".trajlake-bridge-1/to", ""), ("file", "pkg/mod.py", "m"),
        ]),
        reserved=("tests_hidden",),
    )  # fmt: skip
    assert set(state.files) == {"pkg/mod.py"}
    assert set(state.dropped) == {
        "pkg/__pycache__",
        "pkg/.git",
        ".pytest_cache",
        "tests_hidden",
        ".trajlake-bridge-1",
    }


def test_every_file_is_read_whole_whatever_its_mode() -> None:
    state = read_archive(
        _tar([("locked", "table.dat", b"\x00\x01secret"), ("file", "big.txt", "a" * 300_000)])
    )
    assert state.files["table.dat"] == b"\x00\x01secret" and len(state.files["big.txt"]) == 300_000


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ([("file", "huge.bin", b"\0" * (FILE_LIMIT + 1))], "the judge reads files up to"),
        ([("file", "/".join(["d" * 200] * 6) + "/f.py", "x")], f"the judge takes up to {PATH_LIMIT}"),
        ([("file", "bad-\udcff.txt", "x")], "not UTF-8"),
    ],
)
def test_what_the_judge_cannot_take_in_is_unjudgeable(
    entries: list[tuple[str, str, bytes | str]], why: str
) -> None:
    with pytest.raises(WorkspaceUnjudgeable, match=why) as err:
        read_archive(_tar(entries))
    assert err.value.kind == "workspace_unjudgeable"


def test_the_host_reads_a_directory_as_the_sandbox_archives_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("x")
    (tmp_path / "l.py").symlink_to("a/x.py")
    state = read_archive(archive_tree(tmp_path, max_bytes=1 << 20))
    assert state.files == {"a/x.py": b"x", "l.py": b"x"}
    assert state.digest == read_archive(archive_tree(tmp_path, max_bytes=1 << 20)).digest


# --------------------------------------------------------------------------- real sandboxes


def _judge(backend: SandboxBackend, image: str, task_id: str, setup: list[str],
           spec: SandboxSpec | None = None, reference: bool = False) -> Judgement:  # fmt: skip
    task = load_task(TASKS / task_id)
    judge = build_judge(task.spec.judge)
    sb_spec = (spec or SandboxSpec()).with_(image=image, workspace=task.initial_dir)
    with backend.create(sb_spec) as sb:
        task.prepare(sb)
        traj = replay(task, sb, (["apply_reference"] if reference else []) + [{"bash": c} for c in setup])
        return judge(JudgeContext(task=task, sandbox=sb, events=traj.events))


LONG = "/".join(["d" * 200] * 6)


@pytest.mark.parametrize(
    ("task_id", "setup", "flag"),
    [
        # paths: fine inside the sandbox, too long for the judge's tree on the host
        ("pyfix/pyfix-001", [f"mkdir -p {LONG} && echo x > {LONG}/f.py"], "workspace_unjudgeable"),
        ("datawrangle/datawrangle-001", [f"mkdir -p {LONG} && echo x > {LONG}/f"], "workspace_unjudgeable"),
        # sizes: a data file over what the judge reads
        ("pyfix/pyfix-001", ["head -c 5000000 /dev/zero > slugkit/table.bin"], "workspace_unjudgeable"),
        # names: bytes that are not UTF-8
        ("datawrangle/datawrangle-001", ["touch \"$(printf 'out\\377.json')\""], "workspace_unjudgeable"),
        # links: out of the workspace, to nothing, round in a loop
        ("pyfix/pyfix-001", ["ln -s /etc/passwd slugkit/data.txt"], "links_out_of_workspace"),
        ("reverse-like/wordplay", ["ln -s nowhere dangling"], "links_out_of_workspace"),
        (
            "datawrangle/datawrangle-001",
            ["mkdir -p out && ln -s a out/b && ln -s b out/a"],
            "links_out_of_workspace",
        ),
    ],
)
def test_workspace_faults_are_fails_with_a_flag_never_errors(
    local_backend: SandboxBackend, base_image: str, task_id: str, setup: list[str], flag: str
) -> None:
    task_id = "wordplay/wordplay-001" if task_id == "reverse-like/wordplay" else task_id
    j = _judge(local_backend, base_image, task_id, setup, reference=True)
    assert j.verdict == "fail" and j.score == 0.0, j
    assert flag in j.flag_kinds, j.flag_kinds


def test_encodings_and_nesting_that_break_a_reader_are_fails(
    local_backend: SandboxBackend, base_image: str
) -> None:
    deep = "x = " + "(" * 150 + "1" + ")" * 150
    j = _judge(local_backend, base_image, "pyfix/pyfix-001", [
        "printf '# -*- coding: klingon -*-\\nX = 1\\n' > slugkit/enc.py",
        f"python3 -c \"open('slugkit/deep.py', 'w').write('{deep}' + chr(10))\"",
        "python3 -c \"open('slugkit/long.py', 'w').write('y = ' + '-' * 200000 + '1' + chr(10))\"",
    ], reference=True)  # fmt: skip
    assert j.verdict == "fail" and "error" not in j.verdict, j
    assert "code_meaning" in j.flag_kinds


def test_permissions_are_no_fault(local_backend: SandboxBackend, base_image: str) -> None:
    # the reference fix, with the package's files and a directory made unreadable: read all the same
    j = _judge(local_backend, base_image, "pyfix/pyfix-001",
               ["mkdir -p extra && echo x > extra/f", "chmod 000 extra/f extra slugkit/slug.py"],
               reference=True)  # fmt: skip
    assert (j.verdict, j.score) == ("pass", 1.0), j


def test_a_workspace_filled_to_its_last_entry_is_never_an_error(
    local_backend: SandboxBackend, base_image: str
) -> None:
    spec = SandboxSpec(max_files=400)
    fill = "mkdir -p many && cd many && seq 1 1000 | xargs touch || true"
    j = _judge(local_backend, base_image, "pyfix/pyfix-001", [fill],
               spec=spec, reference=True)  # fmt: skip
    # the judge's tree fits where the agent's did: judged (the fix is in it), or unjudgeable if the
    # judge's own channel finds no room, and never filed as the platform's fault
    assert j.verdict == "pass" or (j.verdict == "fail" and j.flag_kinds == ["workspace_unjudgeable"]), j


@pytest.mark.parametrize(
    "setup",
    [
        # the fixed package copied to /tmp and the package directory swapped for a link to it
        [
            "git apply /dev/stdin < /dev/null; true",
            "cp -r slugkit /tmp/slugkit",
            "sed -i 's/.strip(\"-\")/.strip(separator)/' /tmp/slugkit/slug.py",
            "rm -rf slugkit && ln -s /tmp/slugkit slugkit",
        ],
        # the fix written to /tmp, and put on the path when the package is imported
        [
            "cp slugkit/slug.py /tmp/fixed_slug.py",
            "sed -i 's/.strip(\"-\")/.strip(separator)/' /tmp/fixed_slug.py",
            "printf 'import sys\\nsys.path.append(\"/tmp\")\\n' > slugkit/__init__.py",
            "printf 'from fixed_slug import slugify, unique_slug\\n' >> slugkit/__init__.py",
        ],
        # the fix hidden in a cache directory the judge's listing used to skip
        [
            "mkdir -p slugkit/__pycache__ && cp slugkit/slug.py slugkit/__pycache__/fix.py",
            "sed -i 's/.strip(\"-\")/.strip(separator)/' slugkit/__pycache__/fix.py",
            "printf 'from .__pycache__.fix import slugify, unique_slug\\n' > slugkit/__init__.py",
        ],
    ],
    ids=["package-linked-to-tmp", "module-in-tmp-on-the-path", "module-in-pycache"],
)
def test_code_the_judge_never_read_is_not_what_the_tests_get(
    local_backend: SandboxBackend, base_image: str, setup: list[str]
) -> None:
    j = _judge(local_backend, base_image, "pyfix/pyfix-001", setup)
    assert j.verdict == "fail" and j.score == 0.0, j
