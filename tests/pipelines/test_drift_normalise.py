"""The drift check's comparison: what counts as the same output between two runs of one environment."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from judges.errors import TaskSpecError
from judges.tasks import load_task
from pipelines.drift import RecordedCall, normaliser, same
from sandboxes.tools import ToolOutcome

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def call(
    stdout: str = "", *, exit_code: int | None = 0, kind: str | None = None, timed_out: bool = False
) -> RecordedCall:
    return RecordedCall(seq=4, tool="bash", arguments={"command": "x"}, exit_code=exit_code, stdout=stdout,
                        stderr="", timed_out=timed_out, error_kind=kind)  # fmt: skip


def test_what_varies_between_runs_is_normalised_and_nothing_else() -> None:
    norm = normaliser(None)
    pairs = [
        ("==== 3 passed in 0.05s ====", "====== 3 passed in 10.51s ======"),  # pytest's framed summary
        ("Sat Dec  5 07:22:48 UTC 2026", "Sun Dec  6 17:02:11 UTC 2026"),  # date
        (
            "-rw-r--r-- 1 agent agent 468 Dec  5 07:13 README.md",
            "-rw-r--r-- 1 agent agent 468 Jan 12 23:59 README.md",
        ),
        ("made /tmp/tmpa1b2c3 at 2026-12-05T07:22:48.123Z", "made /tmp/tmpzz9 at 2027-01-01T00:00:00Z"),
        ("<object object at 0x7f3a2b1c0d90> pid 41", "<object object at 0x7fffe0001234> pid 7"),
        ("now 1764920568", "now 1764921031.25"),  # date +%s
        ("id 0190d5c2-6f5e-7a1b-9c3d-1e2f3a4b5c6d", "id 7c9e6679-7425-40de-944b-e07fc1f90ae7"),
    ]
    for a, b in pairs:
        assert norm(a) == norm(b), (a, b)
    different = [
        ("3 passed", "2 passed, 1 failed"),
        (
            "-rw-r--r-- 1 agent agent 468 Dec  5 07:13 README.md",
            "-rw-r--r-- 1 agent agent 476 Dec  5 07:13 README.md",
        ),
        ("value = 42", "value = 43"),
        ("/work/a.py", "/work/b.py"),
        ("Decoded 12 bytes", "Decoded 99 bytes"),  # a word that starts like a month is no date
        ("main.c:12:34: error", "main.c:19:40: error"),  # a line:column is no clock time
        ('File "a.py", line 10', 'File "a.py", line 11'),
        (
            "sha256 3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
            "sha256 3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1c",
        ),  # a content hash is content: never normalised
        ("count 1234567", "count 1234568"),
    ]
    for a, b in different:
        assert norm(a) != norm(b), (a, b)


def test_an_outcome_is_the_same_up_to_normalising_and_the_recorders_derived_kinds() -> None:
    norm = normaliser(None)
    assert same(call("1 passed in 0.1s", exit_code=0), ToolOutcome(0, "1 passed in 0.3s"), norm)
    assert not same(call("1 passed", exit_code=0), ToolOutcome(1, "1 passed"), norm)
    # the recorder derives nonzero_exit from the exit code; run_tool does not: not a difference
    assert same(call(exit_code=2, kind="nonzero_exit"), ToolOutcome(2), norm)
    assert not same(call(exit_code=0, kind="invalid_arguments"), ToolOutcome(0), norm)
    # killed at the timeout both times: how much it printed is not compared
    assert same(
        call("a", exit_code=None, kind="timeout", timed_out=True),
        ToolOutcome(None, "ab", timed_out=True),
        norm,
    )
    assert not same(call("a", exit_code=None, timed_out=True), ToolOutcome(0, "a"), norm)


def test_a_task_declares_more_nondeterminism_as_checked_regular_expressions(tmp_path: Path) -> None:
    root = tmp_path / "pyfix"
    shutil.copytree(TASKS / "pyfix" / "pyfix-004", root / "t")
    shutil.copy(TASKS / "pyfix" / "family.yaml", root / "family.yaml")
    spec = root / "t" / "task.yaml"
    before = load_task(root / "t").spec_digest
    spec.write_text(spec.read_text() + "nondeterministic:\n  - 'seed=\\d+'\n")
    task = load_task(root / "t")
    assert task.spec_digest != before  # part of what the task is
    norm = normaliser(task)
    assert norm("run seed=12 ok") == norm("run seed=99 ok") and norm("a=1") != norm("a=2")
    spec.write_text(spec.read_text().replace("'seed=\\d+'", "'seed=(\\d+'"))
    with pytest.raises(TaskSpecError, match="not a regular expression"):
        load_task(root / "t")
