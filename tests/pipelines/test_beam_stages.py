"""Each Beam stage with TestPipeline + assert_that (FnApiRunner set explicitly)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer

from fold.rows import EPISODE_TABLES, event_row, row_to_event
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake, OffsetRange
from pipelines import AssembleEpisodes, DedupEvents, ParseAndValidate, ReadKafkaRanges, WriteDelta
from schemas import parse_event
from schemas.tables import TABLES
from tests.pipelines.factories import call, ended, model, result, reward, started, wire

READ_CLIENTS = ("kafka-python", "confluent")
"""Both Kafka clients the pipeline reads with."""


def pipeline() -> BeamTestPipeline:
    return BeamTestPipeline(runner=FnApiRunner(), options=PipelineOptions([]))


def rec(doc: dict, offset: int, key: bytes | None = None) -> tuple:  # type: ignore[type-arg]
    return (
        "trajlake.episodes",
        0,
        offset,
        key if key is not None else doc["episode_id"].encode(),
        wire(doc),
        0,
    )


def test_parse_and_validate_sends_bad_records_to_the_dead_letter_output() -> None:
    good = [started("e1"), model("e1", 1)]
    batch = [
        rec(good[0], 0),
        (("trajlake.episodes", 0, 1, b"e1", b"{broken", 0)),
        rec(good[1], 2),
        rec(model("e1", 2), 3, key=b"other-episode"),
        ("trajlake.episodes", 0, 4, b"e1", None, 0),
    ]
    with pipeline() as p:
        out = p | beam.Create([batch]) | ParseAndValidate()
        ids = out.events | beam.FlatMap(lambda b: [(r["event_id"], r["offset"]) for r in b.to_pylist()])
        bad = out.quarantine | beam.FlatMap(lambda b: [(r["offset"], r["error"].split(":")[0]) for r in b])
        assert_that(ids, equal_to([(good[0]["event_id"], 0), (good[1]["event_id"], 2)]), label="valid")
        assert_that(
            bad,
            equal_to(
                [
                    (1, "not UTF-8 JSON"),
                    (3, "record key b'other-episode' is not the event's episode_id"),
                    (4, "empty record (tombstone)"),
                ]
            ),
            label="quarantined",
        )


def test_dedup_keeps_the_first_copy_in_the_log() -> None:
    d = started("e1")
    rows = [event_row(parse_event(d), "trajlake.episodes", 0, off) for off in (7, 3, 9)]
    other = event_row(parse_event(model("e1", 1)), "trajlake.episodes", 1, 1)
    with pipeline() as p:
        out = p | beam.Create([[rows[0], other], [rows[1]], [rows[2]]]) | DedupEvents()
        flat = out | beam.FlatMap(lambda b: [(r["event_id"], r["offset"]) for r in b.to_pylist()])
        assert_that(flat, equal_to([(d["event_id"], 3), (other["event_id"], 1)]))


def test_assemble_episodes_emits_rows_of_every_derived_table() -> None:
    docs = [
        started("e1"),
        call("e1", 1),
        result("e1", 2, exit_code=1, stdout="AssertionError: no"),
        reward("e1", 3, "fail"),
        ended("e1", 4, "failure"),
    ]
    rows = [event_row(parse_event(d), "trajlake.episodes", 0, i) for i, d in enumerate(docs)]
    events = pa.Table.from_pylist(rows, schema=TABLES["events"])
    with pipeline() as p:
        # a chunk of episodes and their events in; per table, one Arrow table per chunk out
        got = p | beam.Create([(["e1"], events)]) | AssembleEpisodes()
        out = {n: got[n] | f"Rows_{n}" >> beam.Map(lambda t: t.to_pylist()) for n in EPISODE_TABLES}
        assert_that(
            out["episodes"]
            | beam.FlatMap(lambda rs: [(r["episode_id"], r["status"], r["completeness"]) for r in rs]),
            equal_to([("e1", "failure", "complete")]),
            label="episodes",
        )
        assert_that(
            out["steps"] | beam.Map(lambda rs: [r["seq"] for r in rs]),
            equal_to([[0, 1, 2, 3, 4]]),
            label="steps",
        )
        assert_that(
            out["rewards"] | beam.FlatMap(lambda rs: [(r["judge_version"], r["verdict"]) for r in rs]),
            equal_to([("v1", "fail")]),
            label="rewards",
        )
        assert_that(
            out["failures"] | beam.FlatMap(lambda rs: [(r["category"], r["failing_seq"]) for r in rs]),
            equal_to([("test_failure", 2)]),
            label="failures",
        )


def test_events_rows_rebuild_the_same_events() -> None:
    d = result("e1", 2, exit_code=3, stdout="x", stderr="y")
    e = parse_event(d)
    assert row_to_event(event_row(e, "t", 0, 5)) == e


def test_write_delta_commits_once_per_batch_of_offsets(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    lake.ensure()
    rows = [event_row(parse_event(started(f"e{i}")), "t", 0, i) for i in range(5)]
    for _ in range(2):  # the second run of the same offsets is a no-op
        with pipeline() as p:
            res = (
                p
                | beam.Create([rows[:3], rows[3:]])
                | WriteDelta(str(tmp_path), "events", "insert_new", {"pipe:t:0": 4}, batched=True)
            )
            assert_that(res | beam.Map(lambda r: r["rows"]), equal_to([5]))
    assert lake.read("events").num_rows == 5
    assert lake.table("events").version() == 1
    assert lake.txn_version("events", "pipe:t:0") == 4


@pytest.mark.kafka
def test_read_kafka_ranges_reads_exactly_the_ranges(kafka: EmbeddedKafka, topic: str) -> None:
    prod = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(300):
        prod.send(topic, key=b"k", value=json.dumps({"i": i}).encode(), partition=i % 2)
    prod.flush()
    prod.close()
    ranges = [OffsetRange(topic, 0, 10, 110), OffsetRange(topic, 1, 0, 150)]
    with pipeline() as p:
        batches = p | beam.Create(ranges) | ReadKafkaRanges(kafka.bootstrap, batch_size=32, chunk=40)
        got = batches | beam.FlatMap(lambda b: [(r[1], r[2]) for r in b])
        assert_that(got, equal_to([(0, o) for o in range(10, 110)] + [(1, o) for o in range(150)]))


def test_load_touched_episodes_brings_every_event_of_each_episode(tmp_path: Path) -> None:
    import pyarrow as pa

    from pipelines import LoadTouchedEpisodes
    from schemas import TABLES

    lake = Lake(tmp_path)
    lake.ensure()
    docs = [started("e1"), model("e1", 1), started("e2"), ended("e1", 2, "success"), started("e3")]
    rows = [event_row(parse_event(d), "trajlake.episodes", 0, i) for i, d in enumerate(docs)]
    lake.write("events", pa.Table.from_pylist(rows, schema=TABLES["events"]), mode="insert_new")
    with pipeline() as p:
        out = p | beam.Create([["e1", "e3", "e9"]]) | LoadTouchedEpisodes(str(tmp_path))
        # a chunk: the episode ids asked for and every events row of theirs, in one Arrow table
        got = out | beam.FlatMap(
            lambda chunk: [(e, sorted(r["seq"] for r in chunk[1].to_pylist() if r["episode_id"] == e))
                           for e in chunk[0]]
        )  # fmt: skip
        assert_that(got, equal_to([("e1", [0, 1, 2]), ("e3", [0]), ("e9", [])]))


@pytest.mark.parametrize("client", READ_CLIENTS)
def test_one_reader_serves_ranges_in_any_order_and_threads_get_their_own_consumer(
    kafka: EmbeddedKafka, topic: str, client: str
) -> None:
    import pickle
    import threading

    from pipelines.beam_stages import _ReadRangeFn

    prod = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(60):
        prod.send(topic, key=b"k", value=json.dumps({"i": i}).encode(), partition=i % 2)
    prod.flush()
    prod.close()
    fn = _ReadRangeFn(kafka.bootstrap, batch_size=7, client=client)

    def read(rng: OffsetRange) -> list[tuple[int, int]]:
        return [(r[1], r[2]) for b in fn.process(rng) for r in b]

    # back and forth over one partition and the other: nothing of a range leaks into the next
    asked = [OffsetRange(topic, 0, 20, 30), OffsetRange(topic, 1, 0, 12), OffsetRange(topic, 0, 0, 5),
             OffsetRange(topic, 0, 25, 30)]  # fmt: skip
    for rng in asked:
        assert read(rng) == [(rng.partition, o) for o in range(rng.start, rng.end)]
    assert len(fn._consumers) == 1  # one consumer served them all
    other: list[list[tuple[int, int]]] = []
    t = threading.Thread(target=lambda: other.append(read(OffsetRange(topic, 1, 3, 9))))
    t.start()
    t.join(60)
    assert other == [[(1, o) for o in range(3, 9)]] and len(fn._consumers) == 2
    assert pickle.loads(pickle.dumps(fn))._consumers == {}  # open consumers never travel
    fn.teardown()
    assert fn._consumers == {}


def test_read_units_pack_small_ranges_together_and_cut_large_ones() -> None:
    from pipelines.beam_stages import read_units

    small = [OffsetRange("t", p, 100, 100 + 10 * (p + 1)) for p in range(16)]
    assert [len(u) for u in read_units(small, chunk=50_000)] == [16]  # one assignment for the batch
    big = [OffsetRange("t", 0, 0, 120), OffsetRange("t", 1, 5, 30), OffsetRange("t", 2, 0, 0)]
    units = read_units(big, chunk=50)
    # every offset once; no unit over the chunk or naming a partition twice
    got = sorted((r.partition, o) for u in units for r in u for o in range(r.start, r.end))
    assert got == [(0, o) for o in range(120)] + [(1, o) for o in range(5, 30)]
    assert all(sum(len(r) for r in u) <= 50 for u in units)
    assert all(len({r.partition for r in u}) == len(u) for u in units)
    assert len(units) == 3  # 50 + 50 + (20 of partition 0 with partition 1's 25)


@pytest.mark.kafka
@pytest.mark.parametrize("client", READ_CLIENTS)
def test_one_unit_reads_several_partitions_to_their_ends(
    kafka: EmbeddedKafka, topic: str, client: str
) -> None:
    from pipelines.beam_stages import _ReadRangeFn

    prod = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(90):
        prod.send(topic, key=b"k", value=json.dumps({"i": i}).encode(), partition=i % 2)
    prod.flush()
    prod.close()
    fn = _ReadRangeFn(kafka.bootstrap, batch_size=8, client=client)
    unit = (OffsetRange(topic, 0, 3, 40), OffsetRange(topic, 1, 10, 11))
    for _ in range(2):  # the consumer (with partitions paused by the first read) serves the next
        got = [(r[1], r[2]) for b in fn.process(unit) for r in b]
        assert sorted(got) == [(0, o) for o in range(3, 40)] + [(1, 10)]
        assert [o for p, o in got if p == 0] == list(range(3, 40))  # a partition's records in order
    with pytest.raises(ValueError, match="twice"):
        list(fn.process((OffsetRange(topic, 0, 0, 2), OffsetRange(topic, 0, 5, 6))))
    fn.teardown()


@pytest.mark.kafka
@pytest.mark.parametrize("client", READ_CLIENTS)
def test_a_reused_reader_reads_a_partition_again_after_a_unit_left_its_fetch_half_read(
    kafka: EmbeddedKafka, topic: str, client: str
) -> None:
    # A unit whose partitions end at different polls leaves fetched records of the one that
    # finished first; the same consumer must read that partition again in a later unit (with
    # kafka-python's pause() the half-read fetch was parked and that read waited for ever).
    import queue
    import threading

    from pipelines.beam_stages import _ReadRangeFn

    prod = KafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=50, batch_size=1 << 20)
    for i in range(12_000):
        for p in (0, 1):
            prod.send(topic, key=b"k", value=b"x%d" % i, partition=p)
    prod.flush()
    prod.close()
    fn = _ReadRangeFn(kafka.bootstrap, batch_size=100_000, client=client)
    units = [(OffsetRange(topic, 0, 0, 5000), OffsetRange(topic, 1, 0, 5000)),
             (OffsetRange(topic, 0, 5000, 10_000),), (OffsetRange(topic, 1, 5000, 10_000),),
             (OffsetRange(topic, 0, 10_000, 12_000), OffsetRange(topic, 1, 10_000, 12_000))]  # fmt: skip
    results: queue.Queue[list[tuple[int, int]]] = queue.Queue()

    def read_all() -> None:  # one thread: one consumer serves every unit
        for unit in units:
            results.put([(r[1], r[2]) for b in fn.process(unit) for r in b])

    threading.Thread(target=read_all, daemon=True).start()
    for unit in units:
        got = results.get(timeout=60)  # (a hang fails here)
        want = [(r.partition, o) for r in unit for o in range(r.start, r.end)]
        assert sorted(got) == want
    fn.teardown()


@pytest.mark.kafka
@pytest.mark.parametrize("client", READ_CLIENTS)
def test_records_larger_than_one_fetch_are_read_whole_among_small_ones(
    kafka: EmbeddedKafka, topic: str, client: str
) -> None:
    """A record of several fetches' size (librdkafka asks 4 MiB a partition) comes whole, in order."""
    from pipelines.beam_stages import _ReadRangeFn

    sizes = [10, 9 << 20, 10, 10, 13 << 20, 10]
    prod = KafkaProducer(bootstrap_servers=kafka.bootstrap, max_request_size=20 << 20, linger_ms=0)
    for i, n in enumerate(sizes):
        prod.send(topic, key=b"k", value=bytes([65 + i]) * n, partition=0).get(timeout=60)
    prod.close()
    fn = _ReadRangeFn(kafka.bootstrap, batch_size=100, client=client)
    got = [r for b in fn.process(OffsetRange(topic, 0, 0, len(sizes))) for r in b]
    want = [(i, n, bytes([65 + i])) for i, n in enumerate(sizes)]
    assert [(r[2], len(r[4]), r[4][:1]) for r in got] == want
    fn.teardown()


@pytest.mark.kafka
@pytest.mark.parametrize("client", READ_CLIENTS)
def test_a_range_below_the_logs_start_fails_the_read_and_never_jumps(
    kafka: EmbeddedKafka, topic: str, client: str
) -> None:
    """Records deleted since the batch was planned: the read raises, it does not skip to what is left."""
    from kafka import KafkaAdminClient, TopicPartition

    from pipelines.beam_stages import _ReadRangeFn

    prod = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(20):
        prod.send(topic, key=b"k", value=b"v%d" % i, partition=0)
    prod.flush()
    prod.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    admin.delete_records({TopicPartition(topic, 0): 10})
    admin.close()
    fn = _ReadRangeFn(kafka.bootstrap, batch_size=100, client=client)
    with pytest.raises(Exception) as err:
        list(fn.process(OffsetRange(topic, 0, 5, 15)))
    assert re.search(r"offset\s*out\s*of\s*range", str(err.value), re.I), err.value
    # and the reader goes on with a range that is there
    assert [r[2] for b in fn.process(OffsetRange(topic, 0, 12, 15)) for r in b] == [12, 13, 14]
    fn.teardown()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.integers(0, 40)), min_size=1, max_size=30))
def test_first_copies_in_arrow_keep_what_comparing_rows_keeps(copies: list[tuple[int, int, int]]) -> None:
    """Ids seen once pass in Arrow, the others are compared as rows: the same copies as comparing all."""
    from pipelines.beam_stages import CONTENT_COLUMNS, first_copies_of

    def row(event: int, content: int, offset: int) -> dict[str, object]:
        r = event_row(parse_event(model("e1", event + 1)), "trajlake.episodes", 0, offset)
        return {**r, "event_id": f"id-{event}", "payload": r["payload"].replace("}", f', "x": {content}}}', 1)
                if content else r["payload"]}  # fmt: skip

    rows = [row(e, c, o) for e, c, o in copies]
    want: dict[tuple[object, ...], dict[str, object]] = {}
    for r in rows:  # every row compared, as the stage did before
        key = (r["event_id"], *(r[c] for c in CONTENT_COLUMNS))
        if key not in want or (r["topic"], r["partition"], r["offset"]) < (
            want[key]["topic"], want[key]["partition"], want[key]["offset"]
        ):  # fmt: skip
            want[key] = r
    got = first_copies_of(pa.Table.from_pylist(rows, schema=TABLES["events"])).to_pylist()
    assert sorted((r["event_id"], r["payload"], r["offset"]) for r in got) == sorted(
        (r["event_id"], r["payload"], r["offset"]) for r in want.values()
    )


def test_a_record_that_parses_but_does_not_serialise_is_quarantined_alone() -> None:
    """A lone surrogate escape parses, but pydantic will not write it back: that record is quarantined
    and its neighbours' columns stay whole (found by review: the batch raised on every retry)."""
    from pipelines.beam_stages import _ParseFn

    bad = model("e1", 1, completion="\ud800 lone")  # (the wire JSON holds the escape "\\ud800")
    recs = [
        rec(started("e1"), 0),
        rec(bad, 1),
        rec(model("e1", 2), 2),
    ]
    out = dict(_ParseFn({}).process(recs))
    assert out["events"].column("offset").to_pylist() == [0, 2]
    assert [r["offset"] for r in out["quarantine"]] == [1]
