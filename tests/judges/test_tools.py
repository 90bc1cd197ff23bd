"""The agent's tools run one way for rollouts and for replays (golden sets, admission)."""

from __future__ import annotations

import pytest

from sandboxes import SandboxBackend, SandboxSpec
from sandboxes.tools import ToolAction, parse_action, run_tool


@pytest.fixture
def sandbox(local_backend: SandboxBackend, tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    with local_backend.create(SandboxSpec(workspace=tmp_path, disk_mb=16)) as sb:
        yield sb


def test_each_tool_and_each_way_a_call_can_be_wrong(sandbox) -> None:
    ok = run_tool(sandbox, ToolAction("bash", {"command": "cat a.txt; echo oops >&2; exit 3"}), timeout=30)
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.error_kind) == (3, "hello\n", "oops\n", None)
    wrote = run_tool(sandbox, ToolAction("write_file", {"path": "b/c.txt", "content": "x"}), timeout=30)
    assert wrote.exit_code == 0 and sandbox.read_file("b/c.txt") == b"x"
    read = run_tool(sandbox, ToolAction("read_file", {"path": "b/c.txt"}), timeout=30)
    assert (read.exit_code, read.stdout) == (0, "x")
    for action in (
        ToolAction("read_file", {"path": "/etc/passwd"}),
        ToolAction("read_file", {"path": "missing.txt"}),
        ToolAction("write_file", {"content": "no path"}),
    ):
        out = run_tool(sandbox, action, timeout=30)
        assert out.exit_code == 1 and out.error_kind == "invalid_arguments", action
    unknown = run_tool(sandbox, ToolAction("browse", {}), timeout=30)
    assert unknown.error_kind == "unknown_tool" and "bash" in unknown.stderr


def test_a_full_disk_is_the_agents_error_not_the_sandboxes(sandbox) -> None:
    out = run_tool(
        sandbox, ToolAction("write_file", {"path": "big", "content": "x" * (40 << 20)}), timeout=60
    )
    assert out.error_kind == "invalid_arguments" and out.exit_code == 1


def test_scripted_steps_and_completions_name_the_same_actions() -> None:
    assert ToolAction.from_spec({"bash": "ls"}) == parse_action("```bash\nls\n```")
    assert ToolAction.from_spec({"write_file": {"path": "p", "content": "c"}}) == parse_action(
        '{"tool": "write_file", "arguments": {"path": "p", "content": "c"}}'
    )
    assert ToolAction.from_spec("submit") == parse_action("submit")
    with pytest.raises(ValueError, match="unknown action"):
        ToolAction.from_spec({"browse": "x"})
