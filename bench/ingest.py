"""Ingest throughput: ``EpisodeRecorder`` (spool + Kafka) against raw Kafka producers.

Run::

    .venv/bin/python bench/ingest.py [--events N] [--rounds R] [--bootstrap HOST:PORT] [--json OUT]

What is measured
----------------
A deterministic (seeded) workload of agent episodes is generated up front:
episodes of ~50 events (``episode_started``, then ``model_call`` with a short
prompt message list and a ~700-character completion, ``tool_call`` and
``tool_result`` (~450-character arguments/stdout) alternating, then
``episode_ended``), ~1.1 KB per event on average, built
from a word vocabulary so that lz4 compresses it as it would real text. Each
round runs three variants, each sending ``N`` events and waiting until Kafka
acknowledged every one of them:

(a) ``recorder``: the workload recorded through :class:`EpisodeRecorder` with
    its spool and the default delivery (a shipper process tails the spool into
    Kafka with kafka-python), then ``rec.flush()``. Timed from the first record
    to the end of the flush (every event acknowledged by Kafka and released
    from the spool), so it includes all the recorder's own work: payload
    validation, envelope framing, ids and timestamps, the spool append, and the
    shipper's reading, sending and progress reporting. The shipper is started
    and connected before the timer (one warm-up episode), as the baselines'
    producers are created and connected before theirs.
(a') ``recorder-inline``: the same with ``delivery="inline"``: the recording
    process sends to Kafka itself (kafka-python in the same interpreter), the
    spool only as the safety net.
(a'') ``recorder-confluent``: (a) with ``KafkaSinkConfig(client="confluent")``: the
    shipper sends with librdkafka (:mod:`ingest.confluent_sink`); compared with (c),
    the raw client it is built on (target a''/c >= 0.8).
(b) ``kafka-python``: a raw ``KafkaProducer`` sending pre-serialised bytes, then
    ``flush()``.
(c) ``confluent-kafka``: a raw librdkafka ``Producer`` sending the same
    pre-serialised bytes (``BufferError`` handled by polling), then ``flush()``.

Reported per variant: median events/s and MB/s (10^6 bytes of key + value)
over the rounds, min/max, the ratios a/b and a/c of the medians and the median
of the per-round a/b ratios. The target is a/b >= 0.8 (the recorder keeps at
least 80% of the throughput of the producer it is built on); a miss is
reported, not turned into a failing exit status.

Why the baselines are fair
--------------------------
* Same bytes: the records sent by (b) and (c) are the exact ``(topic, key,
  value)`` tuples the recorder produced for this workload, captured once with a
  ``MemorySink``. (The recorder's runs carry fresh event ids, episode ids and
  timestamps, so their bytes differ only in those fields, with the same
  lengths.) The baselines do none of the event building, so (a) pays for
  everything the recorder adds on top of the producer.
* Same keys: every record is keyed by its episode id; (b) and (c) let the
  producer's default partitioner pick the partition from the key, which is the
  murmur2 mapping the recorder computes once per episode and passes explicitly.
* Same producer settings: (b) uses the very keyword arguments ``KafkaSink``
  builds (``acks=all``, idempotence, lz4, ``linger_ms=5``, 256 KiB batches,
  ``metrics_enabled=False``, same timeouts and in-flight limit); (c) uses
  ``acks=all``, ``enable.idempotence=true``, ``compression.type=lz4`` and
  ``linger.ms=5``.
* Same broker, topic (8 partitions) and process; each producer is created and
  its metadata fetched before its timer starts, in every variant.
* Interleaved rounds (a, b, c in each round) so that drift in machine load,
  broker state (log segments, page cache) or the JIT of the broker hits the
  three variants alike; medians damp the noise of a shared machine.

Every run verifies delivery: (a) ``rec.delivery.stats.acknowledged == N`` and
no record left in the spool; (b) every future ``succeeded()`` after the flush;
(c) exactly ``N`` delivery callbacks without an error. Anything else aborts the
benchmark with an error.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# This script is called ingest.py: keep its own folder off the import path so
# that ``import ingest`` finds the package at the repository root.
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))

import confluent_kafka  # noqa: E402
import kafka  # noqa: E402
from kafka import KafkaProducer  # noqa: E402
from kafka.errors import KafkaError  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ingest.errors import IngestError  # noqa: E402
from ingest.kafka_broker import EmbeddedKafka  # noqa: E402
from ingest.kafka_sink import KafkaSink, KafkaSinkConfig  # noqa: E402
from ingest.recorder import EpisodeRecorder  # noqa: E402
from ingest.sink import MemorySink  # noqa: E402
from schemas.events import PolicyRef, TaskRef  # noqa: E402

TOPIC = "bench.ingest"
PARTITIONS = 8
EVENTS_PER_EPISODE = 50
SEED = 20240601
TARGET_A_OVER_B = 0.8
FLUSH_TIMEOUT_S = 300.0
VARIANTS = ("recorder", "recorder-inline", "recorder-confluent", "kafka-python", "confluent-kafka")
LABELS = {
    "recorder": "(a) recorder+spool+shipper",
    "recorder-inline": "(a') recorder+spool inline",
    "recorder-confluent": "(a'') recorder+spool+shipper on librdkafka",
    "kafka-python": "(b) kafka-python",
    "confluent-kafka": "(c) confluent-kafka",
}

console = Console(width=max(Console().width, 110))


class BenchError(RuntimeError):
    """The benchmark cannot go on (delivery not verified, broker trouble)."""


# --------------------------------------------------------------------- workload

_WORDS = (
    "the a of to and in is that for it with as on def return self import from if else elif "
    "for while try except raise class None True False print len range list dict str int "
    "value key result error test assert file path line data config parser token model "
    "output input node tree index count total buffer stream offset chunk record event "
    "episode reward policy task sandbox command exit status failed passed collected items "
    "traceback call most recent last module function argument expected got instead check "
    "fix bug patch diff apply repository branch commit tests src lib utils core main init "
    "let me look at this first then run suite see what happens now I think the issue is "
    "because missing handling edge case when empty should we update implementation"
).split()
_SYMBOLS = ("(", ")", ":", "=", ".", ",", "_", "/", "\n", "    ", "'", '"', "[", "]", "0", "1", "2")


def _text(rnd: random.Random, n_chars: int) -> str:
    """About ``n_chars`` of code-and-prose-like text (compresses like real text)."""
    parts: list[str] = []
    size = 0
    while size < n_chars:
        w = rnd.choice(_WORDS) if rnd.random() < 0.8 else rnd.choice(_SYMBOLS)
        parts.append(w)
        size += len(w) + 1
    return " ".join(parts)[:n_chars]


@dataclass(frozen=True)
class EpisodeSpec:
    """One pre-generated episode: its refs and its body operations."""

    task: TaskRef
    policy: PolicyRef
    ops: tuple[tuple[Any, ...], ...]
    """``("model", messages, completion, kwargs)``, ``("call", tool, arguments)``,
    ``("result", kwargs)``; the episode is started before and ended after."""
    status: str


def make_workload(n_events: int, seed: int = SEED) -> list[EpisodeSpec]:
    """Episodes totalling exactly ``n_events`` events (``episode_started``/``_ended`` included)."""
    if n_events < 2:
        raise BenchError("--events must be at least 2 (an episode is at least started + ended)")
    rnd = random.Random(seed)
    sizes = [EVENTS_PER_EPISODE] * (n_events // EVENTS_PER_EPISODE)
    rest = n_events % EVENTS_PER_EPISODE
    if rest >= 2:
        sizes.append(rest)
    elif rest == 1:
        sizes[-1] += 1
    policy = PolicyRef(id="bench-policy", version="ckpt-0042")
    tools = ("bash", "write_file", "apply_patch")
    episodes: list[EpisodeSpec] = []
    for e, size in enumerate(sizes):
        ops: list[tuple[Any, ...]] = []
        for i in range(size - 2):
            kind = i % 3
            if kind == 0:
                messages = [
                    {"role": "system", "content": "You are a coding agent. Use the tools."},
                    {"role": "user", "content": _text(rnd, 60)},
                ]
                completion = _text(rnd, rnd.randint(650, 750))
                kwargs = {
                    "finish_reason": "tool_calls",
                    "latency_s": round(rnd.uniform(0.2, 3.0), 3),
                    "prompt_tokens": rnd.randint(500, 8000),
                    "completion_tokens": rnd.randint(120, 220),
                    "model": "bench-model-7b",
                }
                ops.append(("model", messages, completion, kwargs))
            elif kind == 1:
                tool = rnd.choice(tools)
                arguments = {
                    "path": f"src/pkg/module_{rnd.randint(0, 99)}.py",
                    "content": _text(rnd, rnd.randint(400, 500)),
                }
                ops.append(("call", tool, arguments))
            else:
                exit_code = 0 if rnd.random() < 0.8 else 1
                kwargs = {
                    "exit_code": exit_code,
                    "stdout": _text(rnd, rnd.randint(400, 500)),
                    "stderr": "" if exit_code == 0 else _text(rnd, 60),
                    "duration_s": round(rnd.uniform(0.01, 5.0), 3),
                }
                ops.append(("result", kwargs))
        task = TaskRef(id=f"task-{e % 997}", version="3", family="bench")
        status = "success" if rnd.random() < 0.5 else "failure"
        episodes.append(EpisodeSpec(task=task, policy=policy, ops=tuple(ops), status=status))
    return episodes


def record_workload(rec: EpisodeRecorder, workload: list[EpisodeSpec]) -> None:
    """Record every episode of ``workload`` through ``rec`` (as a rollout worker would)."""
    for spec in workload:
        with rec.episode(task=spec.task, policy=spec.policy) as ep:
            call_id = "call-0"
            for op in spec.ops:
                kind = op[0]
                if kind == "model":
                    ep.model_call(messages=op[1], completion=op[2], **op[3])
                elif kind == "call":
                    call_id = ep.tool_call(op[1], op[2])
                else:
                    ep.tool_result(call_id, **op[1])
            ep.end(spec.status)  # type: ignore[arg-type]


def capture_records(workload: list[EpisodeSpec], home: Path) -> list[tuple[str, bytes, bytes]]:
    """The exact ``(topic, key, value)`` records the recorder produces for ``workload``."""
    sink = MemorySink()
    rec = EpisodeRecorder.open(
        bootstrap="unused", home=home, worker_id="cap", topic=TOPIC, sink=sink, spool_max_bytes=1 << 30
    )
    try:
        record_workload(rec, workload)
        rec.flush()
    finally:
        rec.close()
    return list(sink.records)


# --------------------------------------------------------------------- variants


@dataclass
class Run:
    """One timed run of one variant."""

    variant: str
    round: int
    seconds: float
    events: int
    bytes: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


@dataclass
class Bench:
    """Everything a run needs."""

    bootstrap: str
    home: Path
    workload: list[EpisodeSpec]
    records: list[tuple[str, bytes, bytes]]
    n_events: int
    n_bytes: int
    runs: list[Run] = field(default_factory=list)


WARM_UP_EVENTS = 3  # one short episode: started, annotation, ended


def _run_recorder(b: Bench, round_no: int, delivery: str, client: str = "kafka-python") -> float:
    rec = EpisodeRecorder.open(
        bootstrap=b.bootstrap,
        home=b.home,
        worker_id=f"bench-{delivery}-{client}-{round_no}",
        topic=TOPIC,
        spool_max_bytes=max(256 << 20, 4 * b.n_bytes),
        delivery=delivery,  # type: ignore[arg-type]
        sink_config=KafkaSinkConfig(
            bootstrap_servers=b.bootstrap, client_id=f"bench-{delivery}-{round_no}", client=client
        ),
    )
    try:
        # Like the baselines' producers, get connected (and, with the default
        # delivery, the shipper process started) before the timer starts: one
        # short episode recorded and acknowledged.
        with rec.episode(task={"id": "warm-up"}, policy={"id": "bench"}) as ep:
            ep.annotate("warm-up")
            ep.end("aborted")
        rec.flush(timeout=FLUSH_TIMEOUT_S)
        gc.collect()
        t0 = time.perf_counter()
        record_workload(rec, b.workload)
        rec.flush(timeout=FLUSH_TIMEOUT_S)
        elapsed = time.perf_counter() - t0
        stats = rec.delivery.stats
        if stats.acknowledged != b.n_events + WARM_UP_EVENTS or rec.delivery.pending != 0:
            raise BenchError(
                f"recorder ({delivery}): {stats.acknowledged} of {b.n_events} + {WARM_UP_EVENTS} "
                f"events acknowledged, {rec.delivery.pending} still pending (stats: {stats})"
            )
    finally:
        rec.close()
    return elapsed


def run_recorder(b: Bench, round_no: int) -> float:
    """(a): the workload through a fresh recorder, spool and shipper (the default), then flush."""
    return _run_recorder(b, round_no, "shipper")


def run_recorder_inline(b: Bench, round_no: int) -> float:
    """(a'): the same with inline delivery (this process sends to Kafka itself)."""
    return _run_recorder(b, round_no, "inline")


def run_recorder_confluent(b: Bench, round_no: int) -> float:
    """(a''): the default delivery (spool + shipper) on librdkafka (``client="confluent"``)."""
    return _run_recorder(b, round_no, "shipper", "confluent")


def kafka_python_settings(bootstrap: str) -> dict[str, Any]:
    """The exact keyword arguments ``KafkaSink`` gives ``KafkaProducer``."""
    kw = KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, client_id="bench-b"))._kwargs()
    expected = {
        "acks": "all",
        "enable_idempotence": True,
        "compression_type": "lz4",
        "linger_ms": 5,
        "batch_size": 256 * 1024,
        "metrics_enabled": False,
    }
    drift = {k: (kw.get(k), v) for k, v in expected.items() if kw.get(k) != v}
    if drift:
        console.print(f"[yellow]note: KafkaSink settings differ from the documented ones: {drift}")
    return kw


def run_kafka_python(b: Bench, round_no: int) -> float:
    """(b): the captured records through a raw kafka-python producer, then flush."""
    producer = KafkaProducer(**kafka_python_settings(b.bootstrap))
    try:
        if not producer.partitions_for(TOPIC):
            raise BenchError(f"kafka-python: no metadata for topic {TOPIC} from {b.bootstrap}")
        gc.collect()
        send = producer.send
        futures = []
        append = futures.append
        t0 = time.perf_counter()
        for topic, key, value in b.records:
            append(send(topic, value=value, key=key))
        producer.flush(timeout=FLUSH_TIMEOUT_S)
        elapsed = time.perf_counter() - t0
        ok = sum(1 for f in futures if f.succeeded())
        if ok != b.n_events:
            failed = next((f.exception for f in futures if not f.succeeded()), None)
            raise BenchError(
                f"kafka-python: {ok} of {b.n_events} records acknowledged (first failure: {failed!r})"
            )
    finally:
        producer.close(timeout=10)
    return elapsed


def run_confluent(b: Bench, round_no: int) -> float:
    """(c): the captured records through a raw confluent-kafka producer, then flush."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "client.id": "bench-c",
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
        }
    )
    acked = 0
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(err)

    meta = producer.list_topics(TOPIC, timeout=10)
    if TOPIC not in meta.topics or not meta.topics[TOPIC].partitions:
        raise BenchError(f"confluent-kafka: no metadata for topic {TOPIC} from {b.bootstrap}")
    gc.collect()
    produce = producer.produce
    poll = producer.poll
    t0 = time.perf_counter()
    for i, (topic, key, value) in enumerate(b.records):
        while True:
            try:
                produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.01)  # queue full: serve delivery reports, then retry
        if not i & 1023:
            poll(0)
    left = producer.flush(FLUSH_TIMEOUT_S)
    elapsed = time.perf_counter() - t0
    if left or acked != b.n_events:
        raise BenchError(
            f"confluent-kafka: {acked} of {b.n_events} records acknowledged, "
            f"{left} still queued (first error: {errors[0] if errors else None})"
        )
    return elapsed


RUNNERS: dict[str, Callable[[Bench, int], float]] = {
    "recorder": run_recorder,
    "recorder-inline": run_recorder_inline,
    "recorder-confluent": run_recorder_confluent,
    "kafka-python": run_kafka_python,
    "confluent-kafka": run_confluent,
}


# --------------------------------------------------------------------- broker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _confluent_version() -> str:
    v: Any = confluent_kafka.version()  # a str in recent releases, (str, int) in older ones
    return str(v[0] if isinstance(v, tuple) else v)


def _progress(msg: str) -> None:
    console.print(f"[dim]{msg}")


# --------------------------------------------------------------------- report


def summarize(b: Bench, rounds: int) -> dict[str, Any]:
    """Medians, extremes and ratios of the runs."""
    per: dict[str, Any] = {}
    for v in VARIANTS:
        runs = [r for r in b.runs if r.variant == v]
        eps = [r.events_per_s for r in runs]
        mbs = [r.mb_per_s for r in runs]
        per[v] = {
            "label": LABELS[v],
            "rounds": [
                {
                    "round": r.round,
                    "seconds": r.seconds,
                    "events_per_s": r.events_per_s,
                    "mb_per_s": r.mb_per_s,
                }
                for r in runs
            ],
            "median_events_per_s": statistics.median(eps),
            "median_mb_per_s": statistics.median(mbs),
            "min_events_per_s": min(eps),
            "max_events_per_s": max(eps),
            "min_mb_per_s": min(mbs),
            "max_mb_per_s": max(mbs),
        }
    by_round = {(r.variant, r.round): r.events_per_s for r in b.runs}
    per_round_ab = [by_round[("recorder", i)] / by_round[("kafka-python", i)] for i in range(rounds)]
    per_round_ac = [by_round[("recorder", i)] / by_round[("confluent-kafka", i)] for i in range(rounds)]
    a = per["recorder"]["median_events_per_s"]
    ratio_inline_b = (
        per["recorder-inline"]["median_events_per_s"] / per["kafka-python"]["median_events_per_s"]
    )
    ratio_ab = a / per["kafka-python"]["median_events_per_s"]
    ratio_ac = a / per["confluent-kafka"]["median_events_per_s"]
    ratio_confluent = (
        per["recorder-confluent"]["median_events_per_s"] / per["confluent-kafka"]["median_events_per_s"]
    )
    return {
        "variants": per,
        "ratio_a_over_b": ratio_ab,
        "ratio_inline_over_b": ratio_inline_b,
        "ratio_a_over_c": ratio_ac,
        "ratio_recorder_confluent_over_c": ratio_confluent,
        "per_round_a_over_b": per_round_ab,
        "median_per_round_a_over_b": statistics.median(per_round_ab),
        "per_round_a_over_c": per_round_ac,
        "median_per_round_a_over_c": statistics.median(per_round_ac),
        "target": {
            "metric": "a/b (medians)",
            "threshold": TARGET_A_OVER_B,
            "pass": ratio_ab >= TARGET_A_OVER_B,
        },
        "target_confluent": {
            "metric": "a''/c (medians)",
            "threshold": TARGET_A_OVER_B,
            "pass": ratio_confluent >= TARGET_A_OVER_B,
        },
    }


def print_report(summary: dict[str, Any], meta: dict[str, Any]) -> None:
    table = Table(
        title=(
            f"ingest: {meta['events']:,} events x {meta['rounds']} rounds, "
            f"{meta['avg_event_bytes']:.0f} B/event, {TOPIC} ({PARTITIONS} partitions)"
        )
    )
    table.add_column("variant", no_wrap=True)
    table.add_column("median ev/s", justify="right")
    table.add_column("median MB/s", justify="right")
    table.add_column("min ev/s", justify="right")
    table.add_column("max ev/s", justify="right")
    table.add_column("per round ev/s", justify="right", no_wrap=True)
    for v in VARIANTS:
        s = summary["variants"][v]
        table.add_row(
            s["label"],
            f"{s['median_events_per_s']:,.0f}",
            f"{s['median_mb_per_s']:.1f}",
            f"{s['min_events_per_s']:,.0f}",
            f"{s['max_events_per_s']:,.0f}",
            " ".join(f"{r['events_per_s']:,.0f}" for r in s["rounds"]),
        )
    console.print(table)
    per_round = ", ".join(f"{x:.2f}" for x in summary["per_round_a_over_b"])
    console.print(
        f"a/b (medians): {summary['ratio_a_over_b']:.2f}   "
        f"a/c (medians): {summary['ratio_a_over_c']:.2f}   "
        f"a'/b (medians): {summary['ratio_inline_over_b']:.2f}   "
        f"a''/c (medians): {summary['ratio_recorder_confluent_over_c']:.2f}   "
        f"median of per-round a/b: {summary['median_per_round_a_over_b']:.2f} "
        f"[dim]({per_round})"
    )
    verdict = "[bold green]PASS" if summary["target"]["pass"] else "[bold red]MISS"
    verdict_c = "[bold green]PASS" if summary["target_confluent"]["pass"] else "[bold red]MISS"
    console.print(
        f"target: a/b >= {TARGET_A_OVER_B:.1f} -> {verdict}[/] "
        f"(a/b = {summary['ratio_a_over_b']:.2f}; informational)"
    )
    console.print(
        f"target: a''/c >= {TARGET_A_OVER_B:.1f} -> {verdict_c}[/] "
        f"(a''/c = {summary['ratio_recorder_confluent_over_c']:.2f}; informational)"
    )


# --------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--events", type=int, default=50_000, help="events per run (default 50000)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--bootstrap", help="use this broker (HOST:PORT) instead of an embedded one")
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")

    with tempfile.TemporaryDirectory(prefix="trajlake-bench-") as tmp:
        tmpdir = Path(tmp)
        broker: EmbeddedKafka | None = None
        try:
            workload = make_workload(args.events)
            records = capture_records(workload, tmpdir / "capture")
            if len(records) != args.events:
                raise BenchError(f"workload produced {len(records)} records, not {args.events}")
            n_bytes = sum(len(k) + len(v) for _, k, v in records)
            console.print(
                f"workload: {len(workload)} episodes, {len(records):,} events, "
                f"{n_bytes / 1e6:.1f} MB, {n_bytes / len(records):.0f} B/event"
            )

            if args.bootstrap:
                bootstrap = args.bootstrap
                # Creates the bench topic if it is missing (nothing else is touched).
                EmbeddedKafka(
                    tmpdir / "remote", bootstrap, topics={TOPIC: PARTITIONS}, progress=_progress
                ).ensure_topics()
            else:
                bootstrap = f"127.0.0.1:{_free_port()}"
                broker = EmbeddedKafka(
                    tmpdir / "home", bootstrap, topics={TOPIC: PARTITIONS}, progress=_progress
                )
                broker.start()

            b = Bench(
                bootstrap=bootstrap,
                home=tmpdir / "recorder",
                workload=workload,
                records=records,
                n_events=len(records),
                n_bytes=n_bytes,
            )
            for rnd in range(args.rounds):
                for v in VARIANTS:
                    secs = RUNNERS[v](b, rnd)
                    run = Run(variant=v, round=rnd, seconds=secs, events=b.n_events, bytes=n_bytes)
                    b.runs.append(run)
                    console.print(
                        f"[dim]round {rnd + 1}/{args.rounds} {v:>15}: {secs:6.2f} s  "
                        f"{run.events_per_s:9,.0f} ev/s  {run.mb_per_s:6.1f} MB/s"
                    )
        except (BenchError, IngestError, KafkaError) as exc:
            console.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}")
            return 1
        finally:
            if broker is not None:
                broker.stop()

    summary = summarize(b, args.rounds)
    meta = {
        "events": b.n_events,
        "rounds": args.rounds,
        "episodes": len(workload),
        "bytes_per_run": n_bytes,
        "avg_event_bytes": n_bytes / b.n_events,
        "topic": TOPIC,
        "partitions": PARTITIONS,
        "bootstrap": bootstrap,
        "embedded_broker": not args.bootstrap,
        "seed": SEED,
        "python": platform.python_version(),
        "kafka_python": kafka.__version__,
        "confluent_kafka": _confluent_version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "cpus": os.cpu_count(),
        "kafka_python_settings": {
            k: v for k, v in kafka_python_settings(bootstrap).items() if k != "bootstrap_servers"
        },
    }
    print_report(summary, meta)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, **summary}, indent=2))
        console.print(f"[dim]results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
