"""EpisodeRecorder against the in-memory sink: ids, seq, validation, endings, blobs."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ingest import BlobStore, EpisodeRecorder, EpisodeStateError, MemorySink
from schemas import InfraError, SchemaError, parse_event
from schemas.events import Event


class Boom(InfraError):
    pass


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest.fixture
def rec(tmp_path: Path, sink: MemorySink) -> EpisodeRecorder:
    r = EpisodeRecorder.open(bootstrap="unused", home=tmp_path, worker_id="w1", sink=sink, inline_limit=256)
    yield r  # type: ignore[misc]
    r.close()


def events(sink: MemorySink) -> list[Event]:
    return [parse_event(v) for v in sink.values()]


def test_episode_events_are_valid_contiguous_and_stamped(rec: EpisodeRecorder, sink: MemorySink) -> None:
    with rec.episode(
        task={"id": "t1", "family": "pyfix"}, policy={"id": "p", "version": "3"}, group_id="g", attempt=1
    ) as ep:
        ep.sandbox("acquired", backend="local", sandbox_id="sb-1")
        ep.model_call(
            messages=[{"role": "user", "content": "fix"}],
            completion="ls",
            completion_token_ids=[5, 6],
            completion_logprobs=[-0.5, -0.1],
        )
        call = ep.tool_call("bash", {"command": "ls"})
        ep.tool_result(call, exit_code=0, stdout="a.py\n")
        ep.reward(judge_name="tests", judge_version="v1", score=1.0, verdict="pass")
    rec.flush(5)
    evs = events(sink)
    assert [e.type for e in evs] == [
        "episode_started",
        "sandbox",
        "model_call",
        "tool_call",
        "tool_result",
        "reward",
        "episode_ended",
    ]
    assert [e.seq for e in evs] == list(range(7))
    assert len({e.event_id for e in evs}) == 7
    assert {e.episode_id for e in evs} == {ep.episode_id}
    assert all(e.producer.worker_id == "w1" for e in evs)
    assert [e.ts for e in evs] == sorted(e.ts for e in evs)
    end = evs[-1]
    assert end.type == "episode_ended"
    assert end.payload.status == "success"
    assert (end.payload.num_events, end.payload.num_model_calls, end.payload.num_tool_calls) == (6, 1, 1)
    # Every event's key is its episode id.
    assert {k for _, k, _ in sink.records} == {ep.episode_id.encode()}


def test_invalid_event_records_nothing_and_consumes_no_seq(rec: EpisodeRecorder, sink: MemorySink) -> None:
    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        with pytest.raises(SchemaError) as info:
            ep.model_call(completion="x", latency_s=-1)
        assert info.value.fields == ["payload.latency_s"]
        with pytest.raises(SchemaError):
            ep.tool_call("")
        with pytest.raises(SchemaError, match="timezone"):
            ep.annotate("k", ts=dt.datetime(2026, 1, 1))
        ep.annotate("ok", 1)
        ep.end("failure")
    assert [e.seq for e in events(sink)] == [0, 1, 2]


def test_block_raising_infra_error_ends_as_infra_error(rec: EpisodeRecorder, sink: MemorySink) -> None:
    with pytest.raises(Boom):
        with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
            ep.tool_call("bash", {"command": "ls"})
            raise Boom("sandbox died")
    end = events(sink)[-1]
    assert end.type == "episode_ended"
    assert end.payload.status == "infra_error"
    assert "sandbox died" in (end.payload.reason or "")


def test_block_raising_anything_else_ends_as_aborted(rec: EpisodeRecorder, sink: MemorySink) -> None:
    with pytest.raises(ZeroDivisionError):
        with rec.episode(task={"id": "t"}, policy={"id": "p"}):
            _ = 1 / 0
    end = events(sink)[-1]
    assert end.payload.status == "aborted"  # type: ignore[union-attr]
    assert "ZeroDivisionError" in end.payload.reason  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("verdict", "status"),
    [("pass", "success"), ("fail", "failure"), ("error", "infra_error"), (None, "aborted")],
)
def test_status_follows_the_last_verdict(
    rec: EpisodeRecorder, sink: MemorySink, verdict: str | None, status: str
) -> None:
    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        if verdict:
            ep.reward(judge_name="j", judge_version="1", score=0.0, verdict=verdict)
    assert events(sink)[-1].payload.status == status  # type: ignore[union-attr]


def test_no_event_after_the_end(rec: EpisodeRecorder) -> None:
    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        ep.end("truncated")
    with pytest.raises(EpisodeStateError):
        ep.annotate("late")


def test_large_outputs_go_to_the_blob_store(rec: EpisodeRecorder, sink: MemorySink, tmp_path: Path) -> None:
    big = "".join(f"line {i}\n" for i in range(2000))
    prompt = [{"role": "user", "content": "x" * 1000}]
    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        ep.model_call(messages=prompt, completion="ok")
        call = ep.tool_call("bash", {"command": "seq"})
        ep.tool_result(call, exit_code=0, stdout=big, stderr="small")
    evs = events(sink)
    blobs = BlobStore(str(tmp_path / "blobs"))
    mc = evs[1].payload
    assert mc.messages is None and mc.messages_ref is not None  # type: ignore[union-attr]
    assert json.loads(blobs.get(mc.messages_ref))[0]["content"] == "x" * 1000  # type: ignore[union-attr]
    out = evs[3].payload.stdout  # type: ignore[union-attr]
    assert out.blob is not None and out.size == len(big.encode())
    assert blobs.get_text(out.blob) == big
    assert out.text.startswith("line 0") and out.text.rstrip().endswith("line 1999")
    assert len(out.text) < 600
    assert evs[3].payload.stderr.blob is None and evs[3].payload.stderr.text == "small"  # type: ignore[union-attr]


def test_blob_store_is_content_addressed_and_checks_integrity(tmp_path: Path) -> None:
    from ingest import IngestError

    store = BlobStore(str(tmp_path))
    a = store.put(b"hello")
    assert store.put(b"hello") == a and a.size == 5
    assert store.get(a) == b"hello"
    path = tmp_path / a.sha256[:2] / a.sha256[2:4] / a.sha256
    path.write_bytes(b"tampered")
    with pytest.raises(IngestError, match="corrupt"):
        store.get(a)
    with pytest.raises(IngestError, match="no blob"):
        store.get("0" * 64)


def test_blob_store_works_through_fsspec_urls() -> None:
    store = BlobStore("memory://trajlake-test-blobs")
    ref = store.put(b"x" * 10)
    assert store.exists(ref) and store.get(ref) == b"x" * 10


def test_recorder_output_validates_against_the_exported_schema(
    rec: EpisodeRecorder, sink: MemorySink
) -> None:
    import jsonschema

    from schemas import event_json_schemas

    with rec.episode(task={"id": "t"}, policy={"id": "p"}) as ep:
        ep.model_call(completion="a")
        ep.sandbox("crashed", backend="docker", sandbox_id="x", usage={"cpu_s": 1.0})
    schema = event_json_schemas()["envelope"]
    for v in sink.values():
        jsonschema.validate(json.loads(v), schema)
