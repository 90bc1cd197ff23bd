"""Importers of mini-swe-agent, OpenHands and SWE-agent trajectories, on the real fixture files.

The tests under "every fixture" are the case every importer passes (add a format's fixtures to
``ALL``): one contiguous episode, counts equal to what was delivered, every source item mapped
or kept, every result answering a call, detection from content, and ids that a re-import repeats.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from importers import ImportReport, detect_format, formats, import_file
from ingest import EpisodeRecorder, MemorySink
from ingest.errors import ImportFormatError
from schemas import ChatMessage, parse_event
from schemas.events import EventBase
from tests.conftest import FIXTURES

OWN_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "trajectories"
"""Fixtures of this repository (their sources in each folder's README)."""
MINI = sorted((FIXTURES / "mini-swe-agent").glob("*.traj.json"))
OPENHANDS = sorted((FIXTURES / "openhands").glob("*.json"))
SWE = sorted((OWN_FIXTURES / "swe-agent").glob("*.traj"))
ALL = (
    [(p, "mini-swe-agent") for p in MINI]
    + [(p, "openhands") for p in OPENHANDS]
    + [(p, "swe-agent") for p in SWE]
)
IDS = [f"{fmt}/{p.name}" for p, fmt in ALL]
COMMAND_BLOCK = re.compile(r"```mswea_bash_command\n(.*?)\n```", re.DOTALL)


class Imported:
    """One import into a MemorySink: the report, the delivered events, the recorder."""

    def __init__(self, report: ImportReport, events: list[Any], recorder: EpisodeRecorder) -> None:
        self.report = report
        self.events = events
        self.recorder = recorder

    def of_type(self, event_type: str) -> list[Any]:
        return [e for e in self.events if e.type == event_type]

    def prompt(self, model_call: Any) -> list[ChatMessage]:
        """The prompt of a model_call, inline or from the blob store."""
        payload = model_call.payload
        if payload.messages is not None:
            return list(payload.messages)
        assert payload.messages_ref is not None and self.recorder.blobs is not None
        raw = json.loads(self.recorder.blobs.get(payload.messages_ref))
        return [ChatMessage(**m) for m in raw]


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[tuple[EpisodeRecorder, MemorySink]]:
    sink = MemorySink()
    rec = EpisodeRecorder.open(bootstrap="unused", home=tmp_path, worker_id="imp", sink=sink)
    yield rec, sink
    rec.close()


def run_import(recorder: tuple[EpisodeRecorder, MemorySink], path: Path, fmt: str | None) -> Imported:
    rec, sink = recorder
    report = import_file(path, rec, format=fmt)
    rec.flush(timeout=10)
    events = [parse_event(v) for v in sink.values()]
    return Imported(report, events, rec)


def source_items(path: Path) -> list[Any]:
    data = json.loads(path.read_text())
    if isinstance(data, dict) and "trajectory" in data:  # SWE-agent: its steps
        return list(data["trajectory"])
    if isinstance(data, dict):
        return list(data.get("messages", data.get("history", [])))
    return list(data)


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_the_fixture_files_are_present() -> None:
    assert [p.name for p in MINI] == ["github_issue.traj.json", "local.traj.json"]
    assert [p.name for p in OPENHANDS] == ["basic.json", "basic_interactions.json"]
    assert [p.name for p in SWE] == [
        "marshmallow-code__marshmallow-1867.traj",
        "swe-agent__test-repo-i1.traj",
    ]


# ---------------------------------------------------------------- every fixture


@pytest.mark.parametrize(("path", "fmt"), ALL, ids=IDS)
def test_fixture_imports_as_one_contiguous_episode(recorder: Any, path: Path, fmt: str) -> None:
    imp = run_import(recorder, path, fmt)
    events = imp.events
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[0].type == "episode_started"
    assert events[-1].type == "episode_ended"
    assert {e.episode_id for e in events} == {imp.report.episode_id}
    assert len({e.event_id for e in events}) == len(events)
    started, ended = events[0].payload, events[-1].payload
    assert started.task.family == f"imported/{fmt}"
    assert started.metadata["source_format"] == fmt
    assert ended.num_events == len(events) - 1
    assert ended.num_model_calls == len(imp.of_type("model_call"))
    assert ended.num_tool_calls == len(imp.of_type("tool_call"))
    assert ended.status == imp.report.status == "success"  # every fixture ends with a submission
    # the whole source file is kept in the blob store under its sha256
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert started.metadata["source_sha256"] == sha
    assert imp.recorder.blobs is not None and imp.recorder.blobs.get(sha) == path.read_bytes()


@pytest.mark.parametrize(("path", "fmt"), ALL, ids=IDS)
def test_report_counts_equal_delivered_events(recorder: Any, path: Path, fmt: str) -> None:
    imp = run_import(recorder, path, fmt)
    assert imp.report.events == dict(Counter(e.type for e in imp.events))
    assert imp.report.total_events == len(imp.events)
    assert imp.report.format == fmt
    assert imp.report.source == path


@pytest.mark.parametrize(("path", "fmt"), ALL, ids=IDS)
def test_every_source_item_is_mapped_or_listed_as_unmapped(recorder: Any, path: Path, fmt: str) -> None:
    items = source_items(path)
    imp = run_import(recorder, path, fmt)
    report = imp.report
    assert report.source_items == len(items)
    mapped, unmapped = set(report.mapped), set(report.unmapped_items)
    assert mapped.isdisjoint(unmapped)
    assert len(mapped) + len(unmapped) == len(items)
    assert mapped | unmapped == set(range(len(items)))
    assert report.unaccounted() == []
    assert len(report.unmapped) == len(report.unmapped_items)
    # each unmapped item became an annotation carrying the raw item, verbatim
    kept = [e.payload.value for e in imp.of_type("annotation") if e.payload.key == "import.unmapped"]
    assert [k["index"] for k in kept] == report.unmapped_items
    assert all(k["item"] == items[k["index"]] for k in kept)
    for line, index in zip(report.unmapped, report.unmapped_items):
        assert line.startswith(f"item {index} ")
    # mapped items name first-class event types only
    first_class = {"episode_started", "model_call", "tool_call", "tool_result"}
    assert all(set(types) <= first_class for types in report.mapped.values())


@pytest.mark.parametrize(("path", "fmt"), ALL, ids=IDS)
def test_every_tool_result_answers_an_earlier_tool_call(recorder: Any, path: Path, fmt: str) -> None:
    imp = run_import(recorder, path, fmt)
    calls: dict[str, int] = {}
    results = 0
    for event in imp.events:
        if event.type == "tool_call":
            assert event.payload.call_id not in calls
            calls[event.payload.call_id] = event.seq
        elif event.type == "tool_result":
            results += 1
            assert event.payload.call_id in calls, "tool_result before (or without) its tool_call"
    # mini: one per observation plus the submission; OpenHands: one per observation of a tool action
    expected = {
        "github_issue.traj.json": 10,
        "local.traj.json": 2,
        "basic.json": 1,
        "basic_interactions.json": 0,
        "marshmallow-code__marshmallow-1867.traj": 11,
        "swe-agent__test-repo-i1.traj": 5,
    }
    assert results == expected[path.name]


@pytest.mark.parametrize(("path", "fmt"), ALL, ids=IDS)
def test_detect_format_names_each_fixture(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt
    assert fmt in formats()


@pytest.mark.parametrize(("path", "fmt"), ALL, ids=IDS)
def test_import_without_format_detects_it(recorder: Any, path: Path, fmt: str) -> None:
    assert run_import(recorder, path, None).report.format == fmt


@pytest.mark.parametrize(("path", "fmt"), ALL, ids=IDS)
def test_a_reimport_names_the_same_episode_and_events(tmp_path: Path, path: Path, fmt: str) -> None:
    def ids(home: Path) -> list[tuple[str, str, int]]:
        sink = MemorySink()
        rec = EpisodeRecorder.open(bootstrap="unused", home=home, worker_id="imp", sink=sink)
        try:
            import_file(path, rec, format=fmt)
            rec.flush(timeout=10)
        finally:
            rec.close()
        return [(e.episode_id, e.event_id, e.seq) for e in map(parse_event, sink.values())]

    first = ids(tmp_path / "a")
    assert first == ids(tmp_path / "b")
    assert len({e for _, e, _ in first}) == len(first)
    # another file's content is another episode
    other = tmp_path / path.name
    other.write_bytes(path.read_bytes() + b"\n")
    sink = MemorySink()
    rec = EpisodeRecorder.open(bootstrap="unused", home=tmp_path / "c", worker_id="imp", sink=sink)
    try:
        assert import_file(other, rec, format=fmt).episode_id != first[0][0]
    finally:
        rec.close()


# ---------------------------------------------------------------- mini-swe-agent


@pytest.mark.parametrize("path", MINI, ids=[p.name for p in MINI])
def test_mini_assistant_messages_become_model_calls_and_commands(recorder: Any, path: Path) -> None:
    messages = source_items(path)
    imp = run_import(recorder, path, "mini-swe-agent")
    assistant_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    model_calls = imp.of_type("model_call")
    assert [m.payload.completion for m in model_calls] == [messages[i]["content"] for i in assistant_at]
    for call, i in zip(model_calls, assistant_at):
        prompt = imp.prompt(call)
        assert [(p.role, p.content) for p in prompt] == [(m["role"], m["content"]) for m in messages[:i]]
    tool_calls = imp.of_type("tool_call")
    commands = [COMMAND_BLOCK.findall(messages[i]["content"])[0] for i in assistant_at]
    assert [t.payload.arguments for t in tool_calls] == [{"command": c} for c in commands]
    assert [t.payload.tool for t in tool_calls] == ["bash"] * (len(commands) - 1) + ["submit"]
    # each observation's <returncode> is the exit code; the last message is the submission
    codes = [
        int(m["content"].split("</returncode>")[0].split(">")[1])
        for m in messages
        if m["role"] == "user" and m["content"].startswith("<returncode>")
    ]
    results = imp.of_type("tool_result")
    assert [r.payload.exit_code for r in results] == [*codes, None]
    assert results[-1].payload.call_id == tool_calls[-1].payload.call_id
    assert results[-1].payload.stdout.text == messages[-1]["content"]
    started = imp.events[0].payload
    assert started.metadata["system_prompt"] == messages[0]["content"]
    assert started.metadata["instruction"] == messages[1]["content"]
    assert started.task.id == path.name.removesuffix(".traj.json")
    assert started.policy.id == "mini-swe-agent"
    assert imp.report.mapped[0] == imp.report.mapped[1] == ["episode_started"]
    assert imp.report.unmapped == []


def test_mini_local_fixture_exact_events(recorder: Any) -> None:
    imp = run_import(recorder, FIXTURES / "mini-swe-agent" / "local.traj.json", "mini-swe-agent")
    assert [e.type for e in imp.events] == [
        "episode_started",
        "model_call",
        "tool_call",
        "tool_result",
        "model_call",
        "tool_call",
        "tool_result",
        "episode_ended",
    ]
    hello = imp.events[3].payload
    assert (hello.exit_code, hello.stdout.text, hello.error_kind) == (0, "hello world\n", None)
    assert imp.events[5].payload.tool == "submit"
    assert imp.events[-1].payload.status == "success"


def test_mini_github_issue_failed_commands_are_nonzero_exits(recorder: Any) -> None:
    imp = run_import(recorder, FIXTURES / "mini-swe-agent" / "github_issue.traj.json", "mini-swe-agent")
    failed = [r.payload for r in imp.of_type("tool_result") if r.payload.exit_code not in (0, None)]
    assert [(r.exit_code, r.error_kind) for r in failed] == [(1, "nonzero_exit"), (1, "nonzero_exit")]
    assert "No such file or directory" in failed[0].stdout.text
    assert imp.of_type("tool_result")[-1].payload.stdout.text.startswith(
        "diff --git a/tests/missing_colon.py"
    )


def _wrapped(exit_status: str | None, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "info": {
            "exit_status": exit_status,
            "submission": "",
            "model_stats": {"instance_cost": 0.25, "api_calls": 3},
            "mini_version": "1.9.0",
            "config": {"model": {"model_name": "anthropic/claude-sonnet-4"}},
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "django__django-11099",
    }


MSGS = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "fix the bug"},
    {
        "role": "assistant",
        "content": "Let me look.",  # no command block: a format error
        "extra": {
            "response": {
                "model": "claude-sonnet-4-20250514",
                "usage": {"prompt_tokens": 120, "completion_tokens": 7},
                "choices": [{"finish_reason": "stop"}],
            }
        },
    },
    {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks."},
    {"role": "assistant", "content": "```bash\nsleep 100\n```"},
    {
        "role": "user",
        "content": "The last command <command>sleep 100</command> timed out and has been "
        "killed.\nThe output of the command was:\n <output>\npartial\n</output>\n"
        "Please try another command.",
    },
    {"role": "assistant", "content": "```bash\nls\n```\n```bash\npwd\n```"},  # two blocks
    {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2."},
    {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
    {"role": "user", "content": ""},
]


def test_mini_wrapped_format_uses_info(recorder: Any, tmp_path: Path) -> None:
    path = write(tmp_path, "run.traj.json", _wrapped("Submitted", MSGS))
    assert detect_format(path) == "mini-swe-agent"
    imp = run_import(recorder, path, "mini-swe-agent")
    started = imp.events[0].payload
    assert started.task.id == "django__django-11099"
    assert started.policy.id == "anthropic/claude-sonnet-4"
    assert started.metadata["model_stats"] == {"instance_cost": 0.25, "api_calls": 3}
    assert started.metadata["trajectory_format"] == "mini-swe-agent-1"
    first = imp.of_type("model_call")[0].payload
    assert (first.prompt_tokens, first.completion_tokens) == (120, 7)
    assert (first.model, first.finish_reason) == ("claude-sonnet-4-20250514", "stop")
    assert imp.of_type("model_call")[1].payload.model == "anthropic/claude-sonnet-4"
    source_info = [
        e.payload.value for e in imp.of_type("annotation") if e.payload.key == "import.source_info"
    ]
    assert source_info[0]["info"]["submission"] == ""
    assert imp.report.status == "success"


def test_mini_format_errors_and_timeouts(recorder: Any, tmp_path: Path) -> None:
    path = write(tmp_path, "run.traj.json", _wrapped("Submitted", MSGS))
    imp = run_import(recorder, path, "mini-swe-agent")
    assert len(imp.of_type("model_call")) == 4  # every assistant message, format error or not
    errors = [e.payload.value for e in imp.of_type("annotation") if e.payload.key == "format_error"]
    assert [(e["index"], e["reason"]) for e in errors] == [
        (2, "expected exactly one command block, found 0"),
        (6, "expected exactly one command block, found 2"),
    ]
    assert [t.payload.tool for t in imp.of_type("tool_call")] == ["bash", "submit"]
    timeout = imp.of_type("tool_result")[0].payload
    assert (timeout.timed_out, timeout.exit_code, timeout.stdout.text, timeout.error_kind) == (
        True,
        None,
        "partial",
        "timeout",
    )
    assert imp.report.unmapped_items == [3, 7]  # the format-error feedback answers no call
    assert "format error of item 2" in imp.report.unmapped[0]
    assert imp.report.mapped[2] == ["model_call"]
    assert imp.report.mapped[4] == ["model_call", "tool_call"]
    assert imp.report.mapped[5] == ["tool_result"]


@pytest.mark.parametrize(
    ("exit_status", "status"),
    [("Submitted", "success"), ("LimitsExceeded", "truncated"), ("RuntimeError", "aborted")],
)
def test_mini_exit_status_sets_episode_status(
    recorder: Any, tmp_path: Path, exit_status: str, status: str
) -> None:
    path = write(tmp_path, "run.traj.json", _wrapped(exit_status, MSGS[:5]))
    imp = run_import(recorder, path, "mini-swe-agent")
    ended = imp.events[-1].payload
    assert ended.status == imp.report.status == status
    assert exit_status in (ended.reason or "")
    unknown = [n for n in imp.report.notes if "has no trajlake status" in n]
    assert len(unknown) == (1 if status == "aborted" else 0)
    if unknown:
        assert "RuntimeError" in imp.report.summary()


def test_mini_without_submission_is_aborted(recorder: Any, tmp_path: Path) -> None:
    path = write(tmp_path, "cut.traj.json", MSGS[:6])
    imp = run_import(recorder, path, "mini-swe-agent")
    assert imp.report.status == "aborted"
    assert imp.events[0].payload.task.id == "cut"


# ---------------------------------------------------------------- OpenHands


def test_openhands_basic_actions_and_observations(recorder: Any) -> None:
    path = FIXTURES / "openhands" / "basic.json"
    source = source_items(path)
    imp = run_import(recorder, path, "openhands")
    assert [e.type for e in imp.events] == [
        "episode_started",
        "model_call",
        "tool_call",
        "tool_result",
        "model_call",
        "tool_call",
        "episode_ended",
    ]
    started, first, edit, result, second, finish = (e.payload for e in imp.events[:6])
    assert started.task.id == "basic"
    assert started.policy.id == "claude-3-5-sonnet-20241022"
    assert started.metadata["instruction"] == source[0]["args"]["content"]
    assert (first.prompt_tokens, first.completion_tokens, first.finish_reason) == (3486, 1135, "tool_calls")
    assert first.model == "claude-3-5-sonnet-20241022"
    assert first.completion == source[1]["args"]["thought"]
    assert [(m.role, m.content) for m in imp.prompt(imp.events[1])] == [("user", source[0]["message"])]
    # OpenHands' edit args hold no text ("content": ""): the model's own call, which has it, is kept
    native = source[1]["tool_call_metadata"]["model_response"]["choices"][0]["message"]["tool_calls"]
    assert source[1]["args"]["content"] == ""
    assert edit.tool == "edit" and edit.arguments == {**source[1]["args"], "model_tool_call": {
        "id": native[0]["id"], "function": "str_replace_editor",
        "arguments": json.loads(native[0]["function"]["arguments"]),
    }}  # fmt: skip
    assert edit.arguments["model_tool_call"]["arguments"]["file_text"].startswith("import random")
    assert first.tool_calls == native  # the structured call on the model call, and in later prompts
    assert imp.prompt(imp.events[4])[1].tool_calls == native
    assert edit.call_id == source[1]["tool_call_metadata"]["tool_call_id"]
    assert result.call_id == edit.call_id and source[2]["cause"] == source[1]["id"]
    assert result.stdout.text == source[2]["content"]
    assert result.exit_code is None  # the edit observation carries no exit code
    assert second.prompt_tokens == 4646
    assert [m.role for m in imp.prompt(imp.events[4])] == ["user", "assistant", "tool"]
    assert finish.tool == "submit"
    assert {k: v for k, v in finish.arguments.items() if k != "model_tool_call"} == source[3]["args"]
    # event time comes from the naive OpenHands timestamps, read as UTC
    expected = [
        dt.datetime.fromisoformat(source[i]["timestamp"]).replace(tzinfo=dt.UTC)
        for i in (0, 1, 1, 2, 3, 3, 3)
    ]
    assert [e.ts for e in imp.events] == expected
    assert imp.report.mapped == {
        0: ["episode_started"],
        1: ["model_call", "tool_call"],
        2: ["tool_result"],
        3: ["model_call", "tool_call"],
    }


def test_openhands_basic_interactions_messages(recorder: Any) -> None:
    path = FIXTURES / "openhands" / "basic_interactions.json"
    source = source_items(path)
    imp = run_import(recorder, path, "openhands")
    assert [e.type for e in imp.events] == [
        "episode_started",
        "model_call",
        "annotation",
        "model_call",
        "annotation",
        "model_call",
        "tool_call",
        "episode_ended",
    ]
    calls = imp.of_type("model_call")
    assert [c.payload.completion for c in calls[:2]] == [source[1]["message"], source[3]["message"]]
    assert calls[2].payload.completion == ""  # the finish response had no text, only a tool call
    assert (calls[2].payload.model, calls[2].payload.prompt_tokens) == ("gpt-4o-2024-08-06", 2473)
    assert [(m.role, m.content) for m in imp.prompt(calls[2])] == [
        ("user", source[0]["message"]),
        ("assistant", source[1]["message"]),
        ("user", source[2]["message"]),
        ("assistant", source[3]["message"]),
        ("user", source[4]["message"]),
    ]
    submit = imp.of_type("tool_call")[0].payload
    assert (submit.tool, submit.call_id) == ("submit", "call_IpyczPgEAwtpRWFZ2RNokTdH")
    assert imp.events[0].payload.metadata["instruction"] == "what's 1+1?"
    assert imp.report.unmapped_items == [2, 4]
    assert [e.payload.value["item"]["id"] for e in imp.of_type("annotation")] == [6, 12]
    assert "event id 6" in imp.report.unmapped[0]


def _response(rid: str, *calls: tuple[str, str], content: str | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "model": "gpt-4o",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}
                        for cid, name in calls
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5},
    }


def _meta(
    rid: str, cid: str, name: str, *calls: tuple[str, str], content: str | None = None
) -> dict[str, Any]:
    return {
        "function_name": name,
        "tool_call_id": cid,
        "model_response": _response(rid, *calls, content=content),
        "total_calls_in_response": len(calls),
    }


STREAM: list[dict[str, Any]] = [
    {
        "id": 0,
        "timestamp": "2025-03-01T10:00:00",
        "source": "agent",
        "message": "You are OpenHands",
        "action": "system",
        "args": {"content": "You are OpenHands", "tools": [], "agent_class": "CodeActAgent"},
    },
    {
        "id": 1,
        "timestamp": "2025-03-01T10:00:01",
        "source": "user",
        "message": "run the tests",
        "action": "message",
        "args": {"content": "run the tests", "image_urls": None, "wait_for_response": False},
    },
    {
        "id": 2,
        "timestamp": "2025-03-01T10:00:01",
        "source": "environment",
        "message": "",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "running", "reason": ""},
    },
    {
        "id": 3,
        "timestamp": "2025-03-01T10:00:05",
        "source": "agent",
        "message": "Running command: pytest",
        "action": "run",
        "args": {"command": "pytest", "is_input": False, "thought": "Run both.", "blocking": False},
        "tool_call_metadata": _meta(
            "r1", "c1", "execute_bash", ("c1", "execute_bash"), ("c2", "execute_bash"), content="Run both."
        ),
        "llm_metrics": {
            "accumulated_cost": 0.01,
            "token_usages": [],
            "response_latencies": [{"model": "gpt-4o", "latency": 1.5, "response_id": "r1"}],
        },
        "timeout": 120,
    },
    {
        "id": 4,
        "timestamp": "2025-03-01T10:00:05",
        "source": "agent",
        "message": "Running command: ls",
        "action": "run",
        "args": {"command": "ls", "is_input": False, "thought": "", "blocking": False},
        "tool_call_metadata": _meta(
            "r1", "c2", "execute_bash", ("c1", "execute_bash"), ("c2", "execute_bash"), content="Run both."
        ),
        "timeout": 120,
    },
    {
        "id": 5,
        "timestamp": "2025-03-01T10:00:09",
        "source": "agent",
        "message": "Command `pytest` executed",
        "cause": 3,
        "observation": "run",
        "content": "1 failed",
        "extras": {
            "command": "pytest",
            "metadata": {"exit_code": 1, "pid": -1, "suffix": ""},
            "hidden": False,
        },
        "success": False,
    },
    {
        "id": 6,
        "timestamp": "2025-03-01T10:00:09",
        "source": "agent",
        "message": "Command `ls` executed",
        "cause": 4,
        "observation": "run",
        "content": "a.py",
        "extras": {"command": "ls", "exit_code": 0},
    },
    {
        "id": 7,
        "timestamp": "2025-03-01T10:00:20",
        "source": "agent",
        "message": "Running command: sleep",
        "action": "run",
        "args": {"command": "sleep 999", "thought": ""},
        "tool_call_metadata": _meta("r2", "c3", "execute_bash", ("c3", "execute_bash")),
    },
    {
        "id": 8,
        "timestamp": "2025-03-01T10:02:20",
        "source": "agent",
        "message": "",
        "cause": 7,
        "observation": "run",
        "content": "",
        "extras": {
            "command": "sleep 999",
            "metadata": {"exit_code": -1, "suffix": "[The command timed out after 120 seconds.]"},
        },
    },
    {
        "id": 9,
        "timestamp": "2025-03-01T10:02:21",
        "source": "agent",
        "message": "Reading file: /x",
        "action": "read",
        "args": {"path": "/x", "thought": ""},
        "tool_call_metadata": _meta("r3", "c4", "str_replace_editor", ("c4", "str_replace_editor")),
    },
    {
        "id": 10,
        "timestamp": "2025-03-01T10:02:22",
        "source": "agent",
        "message": "no such file",
        "cause": 9,
        "observation": "error",
        "content": "ERROR: /x does not exist",
        "extras": {"error_id": ""},
    },
    {
        "id": 11,
        "timestamp": "2025-03-01T10:02:23",
        "source": "agent",
        "message": "",
        "cause": 9,
        "observation": "null",
        "content": "",
        "extras": {},
    },
    {
        "id": 12,
        "timestamp": "2025-03-01T10:02:24",
        "source": "environment",
        "message": "",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "error", "reason": "budget"},
    },
    {
        "id": 13,
        "timestamp": "not a time",
        "source": "user",
        "message": "",
        "action": "change_agent_state",
        "args": {"agent_state": "stopped", "thought": ""},
    },
]


def test_openhands_stream_with_every_kind_of_event(recorder: Any, tmp_path: Path) -> None:
    path = write(tmp_path, "stream.json", STREAM)
    assert detect_format(path) == "openhands"
    imp = run_import(recorder, path, "openhands")
    report = imp.report
    # one response that issued two actions is one model_call
    calls = imp.of_type("model_call")
    assert len(calls) == 3
    assert calls[0].payload.completion == "Run both."
    assert calls[0].payload.latency_s == 1.5
    assert [m.role for m in imp.prompt(calls[0])] == ["system", "user"]
    assert [t.payload.call_id for t in imp.of_type("tool_call")] == ["c1", "c2", "c3", "c4"]
    results = {r.payload.call_id: r.payload for r in imp.of_type("tool_result")}
    assert (results["c1"].exit_code, results["c1"].stdout.text, results["c1"].error_kind) == (
        1,
        "1 failed",
        "nonzero_exit",
    )
    assert (results["c2"].exit_code, results["c2"].stdout.text) == (0, "a.py")
    assert (results["c3"].exit_code, results["c3"].timed_out) == (None, True)
    assert (results["c4"].stderr.text, results["c4"].error_kind) == (
        "ERROR: /x does not exist",
        "invalid_arguments",
    )
    assert report.unmapped_items == [0, 2, 11, 12, 13]
    assert "already answered by item 10" in report.unmapped[2]
    assert report.mapped[1] == ["episode_started"]
    assert report.mapped[3] == ["model_call", "tool_call"]
    assert report.mapped[4] == ["tool_call"]
    assert imp.events[0].payload.metadata["system_prompt"] == "You are OpenHands"
    # no finish: aborted, with the last agent state in the reason
    assert report.status == "aborted"
    assert "'stopped'" in (imp.events[-1].payload.reason or "")
    assert any("unreadable timestamps at items [13]" in n for n in report.notes)
    assert "item 13" in report.summary()


def test_openhands_agent_message_without_text_is_kept_as_annotation(recorder: Any, tmp_path: Path) -> None:
    stream = [
        {
            "id": 0,
            "timestamp": "2025-03-01T10:00:00",
            "source": "user",
            "action": "message",
            "args": {"content": "hi"},
        },
        {
            "id": 1,
            "timestamp": "2025-03-01T10:00:01",
            "source": "agent",
            "action": "message",
            "message": "",
            "args": {"content": ""},
        },
    ]
    imp = run_import(recorder, write(tmp_path, "quiet.json", stream), "openhands")
    assert imp.report.unmapped_items == [1]
    assert imp.of_type("model_call") == []
    assert imp.report.status == "aborted"


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("name", "content", "fmt", "message"),
    [
        ("number.json", "42", "mini-swe-agent", "got a number"),
        ("number.json", "42", "openhands", "got a number"),
        (
            "nomessages.traj.json",
            '{"info": {"exit_status": "Submitted"}}',
            "mini-swe-agent",
            "needs a 'messages' list",
        ),
        (
            "badmessages.traj.json",
            '{"messages": {"role": "user"}}',
            "mini-swe-agent",
            "'messages' must be a list",
        ),
        (
            "notmessages.traj.json",
            '[{"content": "no role"}]',
            "mini-swe-agent",
            "message 0 must be an object with a string 'role'",
        ),
        ("empty.json", "[]", "openhands", "event list is empty"),
        ("strings.json", '["a", "b"]', "openhands", "event 0 must be an object"),
        ("noactions.json", '[{"id": 1}]', "openhands", "no event has an 'action' or 'observation'"),
        ("broken.json", '{"messages": [', "mini-swe-agent", "not a UTF-8 JSON file"),
    ],
)
def test_malformed_file_raises_import_format_error(
    recorder: Any, tmp_path: Path, name: str, content: str, fmt: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    rec, sink = recorder
    with pytest.raises(ImportFormatError, match=re.escape(message)) as caught:
        import_file(path, rec, format=fmt)
    assert str(path) in str(caught.value)
    rec.flush(timeout=10)
    assert sink.values() == []  # nothing recorded for a file that is not in the format


@pytest.mark.parametrize("content", ["42", '{"info": {}}', "[]", '[{"id": 1}]', "not json"])
def test_detect_format_rejects_unknown_content(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ImportFormatError, match="x.json"):
        detect_format(path)


def test_unknown_format_name_is_rejected(recorder: Any) -> None:
    with pytest.raises(ImportFormatError, match="unknown trajectory format 'sweep-agent'"):
        import_file(MINI[0], recorder[0], format="sweep-agent")


def test_summary_names_counts_and_unmapped_items(recorder: Any) -> None:
    imp = run_import(recorder, FIXTURES / "openhands" / "basic_interactions.json", "openhands")
    summary = imp.report.summary()
    assert f"episode {imp.report.episode_id}" in summary
    assert "model_call=3" in summary and "annotation=2" in summary
    assert "item 2 (event id 6: user action 'message')" in summary


def test_events_are_valid_envelopes(recorder: Any) -> None:
    imp = run_import(recorder, MINI[0], "mini-swe-agent")
    assert all(isinstance(e, EventBase) for e in imp.events)
    assert imp.events[0].producer.worker_id == "imp"


# ---------------------------------------------------------------- SWE-agent


def test_swe_agent_native_tool_calls_prompts_and_durations_are_kept(recorder: Any) -> None:
    path = OWN_FIXTURES / "swe-agent" / "marshmallow-code__marshmallow-1867.traj"
    data = json.loads(path.read_text())
    imp = run_import(recorder, path, None)
    started = imp.events[0].payload
    assert started.policy.id == "gpt-4o"  # from the replay configuration
    assert started.task.id == "marshmallow-code__marshmallow-1867"
    assert "TimeDelta serialization precision" in started.metadata["instruction"]
    assert started.metadata["model_stats"]["api_calls"] == 11
    calls, results, models = imp.of_type("tool_call"), imp.of_type("tool_result"), imp.of_type("model_call")
    turns = [m for m in data["history"] if m["role"] == "assistant" and not m.get("is_demo")]
    steps = data["trajectory"]
    for step, turn, model, call, result in zip(steps, turns, models, calls, results, strict=True):
        native = turn["tool_calls"][0]
        assert model.payload.tool_calls == turn["tool_calls"]  # the model's structured call, kept
        assert model.payload.completion == step["response"]
        assert call.payload.call_id.split(".")[0] == native["id"]  # (ids a replayed run repeats get .step)
        assert call.payload.tool == native["function"]["name"]
        assert call.payload.arguments == json.loads(native["function"]["arguments"])
        assert result.payload.call_id == call.payload.call_id
        out = result.payload.stdout
        full = imp.recorder.blobs.get(out.blob).decode() if out.blob and imp.recorder.blobs else out.text
        assert full == step["observation"]
        assert result.payload.duration_s == pytest.approx(step["execution_time"])
        assert result.payload.exit_code is None  # SWE-agent does not record one
    # the prompt of the second call ends with the first call's answer, its tool calls on the turn
    prompt = imp.prompt(models[1])
    assert prompt[-1].role == "tool" and prompt[-1].tool_call_id == turns[0]["tool_calls"][0]["id"]
    assert prompt[-2].role == "assistant" and prompt[-2].tool_calls == turns[0]["tool_calls"]
    states = [e.payload.value for e in imp.of_type("annotation") if e.payload.key == "swe-agent.state"]
    assert states[0] == {"step": 0, "state": data["trajectory"][0]["state"]}
    info = next(e.payload.value for e in imp.of_type("annotation") if e.payload.key == "import.source_info")
    assert info["info"]["submission"] == data["info"]["submission"]
    assert imp.events[-1].payload.status == "success" and "not judged" in imp.events[-1].payload.reason


def test_swe_agent_without_native_tool_calls_records_the_action_as_a_command(recorder: Any) -> None:
    path = OWN_FIXTURES / "swe-agent" / "swe-agent__test-repo-i1.traj"
    data = json.loads(path.read_text())
    imp = run_import(recorder, path, None)
    calls = imp.of_type("tool_call")
    assert [c.payload.arguments["command"] for c in calls] == [s["action"] for s in data["trajectory"]]
    assert [c.payload.tool for c in calls] == ["bash"] * 4 + ["submit"]
    models = imp.of_type("model_call")
    assert [m.payload.reasoning for m in models] == [s["thought"] for s in data["trajectory"]]
    assert imp.events[0].payload.policy.id == "swe-agent"  # no configuration names the model


@pytest.mark.parametrize(
    ("status", "expected"),
    [("submitted (exit_cost)", "success"), ("exit_context", "truncated"), ("exit_format", "aborted")],
)
def test_swe_agent_exit_status_sets_episode_status(
    recorder: Any, tmp_path: Path, status: str, expected: str
) -> None:
    data = json.loads((OWN_FIXTURES / "swe-agent" / "swe-agent__test-repo-i1.traj").read_text())
    data["info"]["exit_status"] = status
    imp = run_import(recorder, write(tmp_path, "x.traj", data), "swe-agent")
    assert imp.events[-1].payload.status == expected


def test_swe_agent_malformed_history_is_a_clear_error(recorder: Any, tmp_path: Path) -> None:
    data = {"trajectory": [{"action": "ls", "observation": ""}], "history": [{"content": "no role"}]}
    with pytest.raises(ImportFormatError, match="'history' must be a list of chat messages"):
        import_file(write(tmp_path, "bad.traj", data), recorder[0], format="swe-agent")


def _oh(i: int, **fields: Any) -> dict[str, Any]:
    return {"id": i, "timestamp": f"2025-03-01T10:00:{i:02d}", "message": "", **fields}


def test_openhands_a_command_left_running_at_its_timeout_is_timed_out(recorder: Any, tmp_path: Path) -> None:
    suffix = ("\n[The command has no new output after 30 seconds. You may wait longer to see additional "
              "output by sending empty command '', send other commands to interact with the current "
              "process, or send keys to interrupt/kill the command.]")  # fmt: skip
    stream = [
        _oh(0, source="user", action="message", args={"content": "serve it"}),
        _oh(1, source="agent", action="run", args={"command": "python -m http.server", "thought": "start"}),
        _oh(2, source="agent", cause=1, observation="run", content="Serving HTTP on 0.0.0.0 port 8000",
            extras={"command": "python -m http.server", "metadata": {"exit_code": -1, "suffix": suffix}}),
        _oh(3, source="agent", action="finish", args={"outputs": {}, "thought": "done"}),
    ]  # fmt: skip
    imp = run_import(recorder, write(tmp_path, "s.json", stream), "openhands")
    (result,) = imp.of_type("tool_result")
    assert (result.payload.exit_code, result.payload.timed_out, result.payload.error_kind) == (
        None, True, "timeout"
    )  # fmt: skip


@pytest.mark.parametrize(("last_is_answer", "status"), [(True, "success"), (False, "aborted")])
def test_openhands_awaiting_the_user_after_an_answer_is_not_aborted(
    recorder: Any, tmp_path: Path, last_is_answer: bool, status: str
) -> None:
    stream = [
        _oh(0, source="user", action="message", args={"content": "what is 2+2?"}),
        _oh(1, source="agent", action="run", args={"command": "python -c 'print(2+2)'", "thought": ""}),
        _oh(2, source="agent", cause=1, observation="run", content="4",
            extras={"metadata": {"exit_code": 0}}),
    ]  # fmt: skip
    if last_is_answer:
        stream.append(_oh(3, source="agent", action="message", args={"content": "It is 4."}))
    stream.append(_oh(4, source="environment", observation="agent_state_changed", content="",
                      extras={"agent_state": "awaiting_user_input"}))  # fmt: skip
    imp = run_import(recorder, write(tmp_path, "s.json", stream), "openhands")
    assert imp.events[-1].payload.status == status


def test_a_file_an_importer_fails_on_half_way_sends_nothing(recorder: Any, tmp_path: Path) -> None:
    """Its ids are permanent: a partial episode under them would make every later import look done."""
    stream = [
        _oh(0, source="user", action="message", args={"content": "go"}),
        _oh(1, source="agent", action="run", args={"command": "ls", "thought": ""}),
        {**_oh(2, source="agent", observation="run", content="x"), "cause": {"not": "an id"}},
    ]
    rec, sink = recorder
    with pytest.raises(ImportFormatError, match="the openhands importer failed on it .*nothing was sent"):
        import_file(write(tmp_path, "s.json", stream), rec, format="openhands")
    data = json.loads((OWN_FIXTURES / "swe-agent" / "swe-agent__test-repo-i1.traj").read_text())
    data["trajectory"][2]["execution_time"] = float("inf")  # (json writes Infinity)
    with pytest.raises(ImportFormatError, match="nothing sent"):
        import_file(write(tmp_path, "x.traj", data), rec, format="swe-agent")
    rec.flush(timeout=10)
    assert sink.values() == []


@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, '{"a": ' + "1" * 5000 + "}"])
def test_json_python_cannot_read_is_a_format_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "odd.json"
    path.write_text(content)
    with pytest.raises(ImportFormatError, match="JSON that cannot be read here"):
        detect_format(path)


def test_swe_agent_repeated_call_ids_stay_unique(recorder: Any, tmp_path: Path) -> None:
    data = json.loads((OWN_FIXTURES / "swe-agent" / "marshmallow-code__marshmallow-1867.traj").read_text())
    turns = [m for m in data["history"] if m["role"] == "assistant" and not m.get("is_demo")]
    for turn, name in zip(turns[:3], ["a", "a.2", "a"], strict=True):
        turn["tool_calls"][0]["id"] = name
    imp = run_import(recorder, write(tmp_path, "x.traj", data), "swe-agent")
    ids = [c.payload.call_id for c in imp.of_type("tool_call")]
    assert len(set(ids)) == len(ids) and ids[:2] == ["a", "a.2"]


def test_a_ledger_line_of_another_shape_is_skipped(tmp_path: Path) -> None:
    from importers.ledger import ImportLedger

    path = tmp_path / "ledger.jsonl"
    path.write_text('{"episode_id": ["x"]}\nnot json\n{"episode_id": "e1"}\n')
    assert ImportLedger(path).known({"e1", "x"}) == {"e1"}
