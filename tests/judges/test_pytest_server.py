"""The judge's forked pytest: same results as a fresh interpreter, nothing carried between runs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from judges import pytest_server
from judges.host_run import _site_paths
from judges.junit import parse_junit

TESTS = """
import os, sys

def test_passes():
    assert 1 + 1 == 2

def test_fails():
    assert os.environ.get("MARK") == "never"

def test_env_is_the_runs():
    assert os.environ["MARK"] == os.environ["EXPECT_MARK"] and "LEFTOVER" not in os.environ

def test_clean_interpreter():
    # a previous run's module and variable must not be here
    assert "leftover_from_a_run" not in sys.modules
    sys.modules["leftover_from_a_run"] = sys
    os.environ["LEFTOVER"] = "1"
"""


@pytest.fixture(scope="module")
def server():
    s = pytest_server.PytestServer(_site_paths())
    yield s
    s.close()


def _run(server, tmp: Path, mark: str, *, body: str = TESTS, timeout: float = 60):
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "test_x.py").write_text(body)
    report = tmp / "report.xml"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "MARK": mark, "EXPECT_MARK": mark,
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # fmt: skip
    args = ["-q", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp),
            f"--junitxml={report}", str(tmp / "test_x.py")]  # fmt: skip
    res = server.run(args, cwd=tmp, env=env, output=tmp / "console.txt", plugins=[], timeout=timeout)
    return res, report


def test_runs_report_like_pytest_and_leave_nothing_behind(server, tmp_path: Path) -> None:
    for i in range(3):
        res, report = _run(server, tmp_path / str(i), f"m{i}")
        assert res is not None and not res.timed_out
        assert res.exit_code == 1, res.output  # one test fails by design
        outcomes = {o.name.split("::")[-1]: o.status for o in parse_junit(report.read_text())}
        expected = {"test_passes": "passed", "test_fails": "failed",
                    "test_clean_interpreter": "passed", "test_env_is_the_runs": "passed"}  # fmt: skip
        assert outcomes == expected, res.output
        assert "1 failed, 3 passed" in res.output


def test_concurrent_runs_each_get_their_own_result(server, tmp_path: Path) -> None:
    results: dict[int, object] = {}

    def one(i: int) -> None:
        body = "def test_a():\n    assert %s\n" % ("True" if i % 2 else "False")
        results[i] = _run(server, tmp_path / str(i), "x", body=body)[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert {i: r.exit_code for i, r in results.items()} == {0: 1, 1: 0, 2: 1, 3: 0}  # type: ignore[attr-defined]


def test_a_run_past_its_deadline_is_killed_with_its_children(server, tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    body = (
        "import subprocess, time\n"
        "def test_hangs():\n"
        f"    p = subprocess.Popen(['sleep', '300']); open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "    time.sleep(300)\n"
    )
    t = time.monotonic()
    res, _ = _run(server, tmp_path / "hang", "x", body=body, timeout=3)
    assert res is not None and res.timed_out and res.exit_code is None
    assert time.monotonic() - t < 60
    pid = int(marker.read_text())
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the run's child {pid} outlived the deadline")


def test_a_dead_server_is_replaced(server, tmp_path: Path) -> None:
    res, _ = _run(server, tmp_path / "a", "x", body="def test_a():\n    pass\n")
    assert res is not None and res.exit_code == 0
    assert server._proc is not None
    server._proc.kill()
    server._proc.wait()
    res, _ = _run(server, tmp_path / "b", "x", body="def test_a():\n    pass\n")
    assert res is not None and res.exit_code == 0, "a new server takes the next run"


def test_turned_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAJLAKE_JUDGE_FORK", "0")
    assert pytest_server.shared(_site_paths()) is None


def test_a_dead_servers_reader_fails_only_its_own_runs(server, tmp_path: Path) -> None:
    """The reader of a killed server may see its end after a new server took a run: that run goes on."""
    from judges.pytest_server import _Call

    res, _ = _run(server, tmp_path / "a", "x", body="def test_a():\n    pass\n")
    assert res is not None and res.exit_code == 0
    old = server._proc
    old.kill()
    old.wait()
    res, _ = _run(server, tmp_path / "b", "x", body="def test_a():\n    pass\n")  # a new server
    assert res is not None and res.exit_code == 0 and server._proc is not old
    waiting_new, waiting_old = _Call(), _Call()
    waiting_new.proc, waiting_old.proc = server._proc, old
    server._calls.update({10_001: waiting_new, 10_002: waiting_old})
    server._read(old)  # (its output is at its end: the reader's last act, late)
    assert waiting_old.done.is_set() and not waiting_new.started.is_set() and not waiting_new.done.is_set()
    server._calls.clear()
