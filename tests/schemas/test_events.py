"""Event schemas: round trips, JSON Schema validity, upcasting, field-naming errors."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import (
    EVENT_TYPES,
    SchemaError,
    ToolResult,
    current_version,
    event_json_schemas,
    export_json_schemas,
    new_id,
    parse_event,
    serialize_event,
    upcast,
    uuid7,
)

TS = "2026-11-29T12:00:00.123456Z"
PRODUCER = {"worker_id": "w1", "host": "h", "sdk_version": "0.1.0", "pid": 1}

PAYLOADS: dict[str, dict[str, Any]] = {
    "episode_started": {
        "task": {"id": "pyfix-001", "version": "3", "family": "pyfix"},
        "policy": {"id": "qwen", "version": "ckpt-7"},
        "group_id": "g1",
        "attempt": 2,
        "sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512, "seed": 1},
        "sandbox_image": "sha256:" + "a" * 64,
        "limits": {"max_steps": 30, "time_limit_s": 600},
        "metadata": {"source": "test"},
    },
    "model_call": {
        "messages": [{"role": "user", "content": "fix it"}],
        "completion": "ls",
        "completion_token_ids": [1, 2],
        "completion_logprobs": [-0.1, -0.2],
        "finish_reason": "stop",
        "latency_s": 0.5,
        "prompt_tokens": 10,
        "completion_tokens": 2,
    },
    "tool_call": {"call_id": "c1", "tool": "bash", "arguments": {"command": "ls -la"}},
    "tool_result": {
        "call_id": "c1",
        "exit_code": 1,
        "stdout": {"text": "a.py", "size": 4},
        "stderr": {"text": "boom", "size": 4},
        "duration_s": 0.2,
        "timed_out": False,
        "error_kind": "nonzero_exit",
    },
    "sandbox": {
        "action": "acquired",
        "backend": "local",
        "sandbox_id": "sb1",
        "usage": {"cpu_s": 0.1, "max_rss_bytes": 1024},
    },
    "reward": {
        "judge_name": "tests",
        "judge_version": "abc123",
        "judge_spec": {"name": "tests", "args": {"cmd": "pytest"}},
        "score": 0.5,
        "components": {"correctness": 0.5},
        "verdict": "fail",
        "evidence": {"tests": [{"name": "t1", "outcome": "failed"}]},
        "flags": ["reward_hack_suspected"],
        "source": "rejudge",
        "rejudge_run_id": "rj-1",
    },
    "episode_ended": {
        "status": "failure",
        "num_events": 6,
        "num_model_calls": 1,
        "num_tool_calls": 1,
        "reason": "tests failed",
    },
    "annotation": {"key": "note", "value": {"x": 1}, "author": "me"},
}


def envelope(event_type: str, **over: Any) -> dict[str, Any]:
    d = {
        "event_id": new_id(),
        "episode_id": "ep-1",
        "seq": 3,
        "type": event_type,
        "ts": TS,
        "schema_version": current_version(event_type),
        "producer": PRODUCER,
        "payload": PAYLOADS[event_type],
    }
    d.update(over)
    return d


def test_every_event_type_has_an_example() -> None:
    assert set(PAYLOADS) == set(EVENT_TYPES)


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_round_trip_wire_bytes(event_type: str) -> None:
    raw = json.dumps(envelope(event_type)).encode()
    event = parse_event(raw)
    assert event.type == event_type
    again = parse_event(serialize_event(event))
    assert again == event
    assert serialize_event(again) == serialize_event(event)
    assert event.ts == dt.datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=dt.UTC)


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_examples_validate_against_exported_json_schema(event_type: str) -> None:
    docs = event_json_schemas()
    for name in ("envelope", event_type):
        jsonschema.Draft202012Validator.check_schema(docs[name])
        jsonschema.validate(envelope(event_type), docs[name])


def test_export_writes_one_file_per_type_plus_envelope(tmp_path: Any) -> None:
    files = export_json_schemas(tmp_path)
    names = {p.name for p in files if p.parent == tmp_path}
    assert names == {f"{t}.schema.json" for t in EVENT_TYPES} | {"envelope.schema.json"}
    for p in files:
        jsonschema.Draft202012Validator.check_schema(json.loads(p.read_text()))


def test_json_schema_rejects_what_the_parser_rejects() -> None:
    docs = event_json_schemas()
    bad = envelope("tool_call", seq=-1)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, docs["envelope"])
    with pytest.raises(SchemaError):
        parse_event(bad)


@pytest.mark.parametrize(
    ("event_type", "path", "value"),
    [
        ("model_call", "payload.latency_s", -1),
        ("model_call", "payload.completion", None),
        ("tool_call", "payload.tool", ""),
        ("tool_result", "payload.exit_code", "zero"),
        ("reward", "payload.verdict", "maybe"),
        ("episode_ended", "payload.status", "done"),
        ("sandbox", "payload.action", "exploded"),
        ("episode_started", "payload.task.id", ""),
        ("annotation", "seq", -5),
        ("tool_call", "event_id", "not-a-uuid"),
        ("tool_call", "episode_id", ""),
        ("tool_call", "ts", "yesterday"),
        ("tool_call", "producer.worker_id", ""),
    ],
)
def test_invalid_field_is_named_in_the_error(event_type: str, path: str, value: Any) -> None:
    d = envelope(event_type)
    node: Any = d
    parts = path.split(".")
    for part in parts[:-1]:
        node[part] = dict(node[part])
        node = node[part]
    node[parts[-1]] = value
    with pytest.raises(SchemaError) as info:
        parse_event(json.dumps(d))
    assert path in info.value.fields, info.value.errors
    assert path in str(info.value)


def test_naive_timestamp_is_rejected() -> None:
    with pytest.raises(SchemaError) as info:
        parse_event(envelope("tool_call", ts="2026-11-29T12:00:00"))
    assert "ts" in info.value.fields


def test_unknown_type_and_future_version_and_garbage() -> None:
    with pytest.raises(SchemaError, match="unknown event type"):
        parse_event(envelope("tool_call", type="telepathy"))
    with pytest.raises(SchemaError, match="newer than this reader"):
        parse_event(envelope("tool_call", schema_version=99))
    with pytest.raises(SchemaError, match="not UTF-8 JSON"):
        parse_event(b"\xff\xfe{")
    with pytest.raises(SchemaError, match="JSON object"):
        parse_event(b"[1, 2]")
    with pytest.raises(SchemaError):
        parse_event(envelope("tool_call", extra_field=1))


def test_model_call_logprobs_must_match_token_ids() -> None:
    d = envelope("model_call")
    d["payload"] = {**d["payload"], "completion_logprobs": [-0.1]}
    with pytest.raises(SchemaError, match="one entry per completion token"):
        parse_event(d)


def test_rejudge_reward_needs_run_id() -> None:
    d = envelope("reward")
    d["payload"] = {**d["payload"], "rejudge_run_id": None}
    with pytest.raises(SchemaError, match="rejudge_run_id"):
        parse_event(d)


# ----------------------------------------------------------- schema evolution


def v1_tool_result(**payload: Any) -> dict[str, Any]:
    base = {
        "call_id": "c1",
        "exit_code": 0,
        "output": "hello\n",
        "duration_s": 0.1,
        "timed_out": False,
        "error": None,
    }
    base.update(payload)
    return envelope("tool_result", schema_version=1, payload=base)


def test_tool_result_is_at_version_2() -> None:
    assert current_version("tool_result") == 2
    assert ToolResult.model_fields["schema_version"].default == 2


def test_v1_tool_result_reads_as_v2() -> None:
    event = parse_event(json.dumps(v1_tool_result()).encode())
    assert isinstance(event, ToolResult)
    assert event.schema_version == 2
    assert event.payload.stdout.text == "hello\n"
    assert event.payload.stdout.size == 6
    assert event.payload.stderr.text == ""
    assert event.payload.error_kind is None


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ({"timed_out": True, "exit_code": None}, "timeout"),
        ({"exit_code": 2}, "nonzero_exit"),
        ({"exit_code": None, "error": "unknown tool 'foo'"}, "unknown_tool"),
        ({"exit_code": None, "error": "sandbox died"}, "sandbox_error"),
    ],
)
def test_v1_errors_map_to_v2_error_kind(payload: dict[str, Any], kind: str) -> None:
    assert parse_event(v1_tool_result(**payload)).payload.error_kind == kind  # type: ignore[union-attr]


def test_the_written_version_is_the_envelopes_wherever_its_key_sits() -> None:
    from schemas.codec import parse_event_as_written

    def payload_first(doc: dict[str, Any]) -> bytes:
        rest = {k: v for k, v in doc.items() if k != "payload"}
        return json.dumps({"payload": doc["payload"], **rest}).encode()

    # a payload holding a key of the same name, before the envelope's own field
    note = envelope("annotation", payload={"key": "k", "value": {"schema_version": 7}})
    raw = payload_first(note)
    assert raw.index(b'"schema_version": 7') < raw.index(b'"schema_version": 1')
    assert parse_event_as_written(raw)[1] == 1
    old = v1_tool_result()
    event, written = parse_event_as_written(payload_first(old))
    assert (event.schema_version, written) == (2, 1)  # upcast to 2, written at 1
    assert parse_event_as_written(serialize_event(event)) == (event, 2)


def test_upcast_leaves_current_versions_alone() -> None:
    d = envelope("tool_result")
    assert upcast(d) is d


def test_invalid_v1_event_names_the_field_after_upcasting() -> None:
    with pytest.raises(SchemaError) as info:
        parse_event(v1_tool_result(duration_s=-3))
    assert "payload.duration_s" in info.value.fields


# ----------------------------------------------------------- ids


def test_uuid7_layout_and_order() -> None:
    ids = [uuid7() for _ in range(5000)]
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in ids)
    assert ids == sorted(ids)
    strs = [new_id() for _ in range(5000)]
    assert strs == sorted(strs) and len(set(strs)) == 5000
    assert all(uuid.UUID(s).version == 7 for s in strs[:50])


# ----------------------------------------------------------- property tests

text = st.text(max_size=40)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
json_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | floats | text
json_value = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)

PAYLOAD_STRATEGIES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "tool_call": st.fixed_dictionaries(
        {
            "call_id": st.text(min_size=1, max_size=20),
            "tool": st.text(min_size=1, max_size=20),
            "arguments": st.dictionaries(st.text(max_size=8), json_value, max_size=4),
        }
    ),
    "tool_result": st.fixed_dictionaries(
        {
            "call_id": st.text(min_size=1, max_size=20),
            "exit_code": st.none() | st.integers(-255, 255),
            "stdout": st.fixed_dictionaries({"text": text, "size": st.integers(0, 10**9)}),
            "stderr": st.fixed_dictionaries({"text": text, "size": st.integers(0, 10**9)}),
            "duration_s": st.floats(0, 1e6),
            "timed_out": st.booleans(),
            "error_kind": st.none() | st.sampled_from(["timeout", "nonzero_exit", "sandbox_error"]),
        }
    ),
    "model_call": st.fixed_dictionaries(
        {
            "completion": text,
            "messages": st.none()
            | st.lists(
                st.fixed_dictionaries(
                    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": text}
                ),
                max_size=3,
            ),
            "latency_s": st.floats(0, 1e4),
            "prompt_tokens": st.none() | st.integers(0, 10**6),
        }
    ),
    "reward": st.fixed_dictionaries(
        {
            "judge_name": st.text(min_size=1, max_size=10),
            "judge_version": st.text(min_size=1, max_size=10),
            "score": floats,
            "verdict": st.sampled_from(["pass", "fail", "error"]),
            "components": st.dictionaries(st.text(max_size=8), floats, max_size=3),
            "evidence": json_value,
            "flags": st.lists(text, max_size=3),
        }
    ),
    "annotation": st.fixed_dictionaries({"key": st.text(min_size=1, max_size=20), "value": json_value}),
    "episode_ended": st.fixed_dictionaries(
        {
            "status": st.sampled_from(["success", "failure", "truncated", "infra_error", "aborted"]),
            "num_events": st.integers(0, 10**6),
        }
    ),
}


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    event_type = draw(st.sampled_from(sorted(PAYLOAD_STRATEGIES)))
    ts = draw(
        st.datetimes(
            min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1), timezones=st.just(dt.UTC)
        )
    )
    return envelope(
        event_type,
        payload=draw(PAYLOAD_STRATEGIES[event_type]),
        seq=draw(st.integers(0, 2**40)),
        episode_id=draw(st.text(min_size=1, max_size=60)),
        ts=ts.isoformat(),
    )


@settings(max_examples=300, deadline=None)
@given(valid_events())
def test_any_valid_event_survives_serialize_parse(d: dict[str, Any]) -> None:
    event = parse_event(json.dumps(d))
    wire = serialize_event(event)
    assert parse_event(wire) == event
    assert json.loads(wire)["payload"].keys() >= d["payload"].keys()


MUTATIONS: list[tuple[str, Any]] = [
    ("seq", -1),
    ("seq", "one"),
    ("event_id", "x"),
    ("episode_id", ""),
    ("ts", "noon"),
    ("schema_version", 0),
    ("producer", None),
    ("payload", "text"),
    ("type", "nope"),
]


@settings(max_examples=300, deadline=None)
@given(valid_events(), st.sampled_from(MUTATIONS))
def test_any_invalid_event_fails_naming_the_field(d: dict[str, Any], mutation: tuple[str, Any]) -> None:
    field, value = mutation
    d[field] = value
    with pytest.raises(SchemaError) as info:
        parse_event(json.dumps(d))
    assert any(f == field or f.startswith(field + ".") for f in info.value.fields), info.value.errors
