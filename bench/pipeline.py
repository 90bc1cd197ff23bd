"""Pipeline throughput and freshness: the Beam pipeline against a plain-Python baseline.

Run::

    .venv/bin/python bench/pipeline.py [--events 200000] [--freshness-events 1500] [--json OUT]

One run, one broker (started here on a free port), the same events for both:

(a) ``pipeline``: ``pipelines.run_once`` (Beam on the local FnApiRunner, its
    default 2 worker processes): Kafka -> parse/validate -> dedup -> ``events``
    -> fold touched episodes -> ``episodes``, ``steps`` (and also
    ``quarantine``, ``rewards``, ``failures``, which the baseline skips), every
    table committed with its ``txn`` actions.
(b) ``baseline``: one plain Python process doing the same reads (kafka-python
    consumer to the end offsets), the same parsing and validation
    (``parse_event``), dedup by ``event_id``, the same fold
    (``fold_episode`` -> ``episode_row``/``step_rows``) and Delta writes of
    ``events``, ``episodes``, ``steps`` with deltalake, no Beam.

Then freshness in ``--follow`` mode: a pipeline follows two fresh topics while a
recorder produces events at a steady rate; for each event, the seconds from
``record()`` returning to the event being visible in the ``events`` table.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this folder holds ingest.py etc.: keep it from shadowing the packages

import pyarrow as pa  # noqa: E402
from kafka import KafkaConsumer, TopicPartition  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ingest import EpisodeRecorder  # noqa: E402
from ingest.kafka_broker import EmbeddedKafka  # noqa: E402
from lake import Lake  # noqa: E402
from pipelines import PipelineConfig, run_follow, run_once  # noqa: E402
from pipelines.beam_stages import event_row  # noqa: E402
from pipelines.projection import episode_row, fold_episode, step_rows  # noqa: E402
from schemas import TABLES, SchemaError, parse_event  # noqa: E402

console = Console(width=120)
TOPICS = ("trajlake.episodes", "trajlake.judgements")
FRESH = ("fresh.episodes", "fresh.judgements")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def produce(
    bootstrap: str,
    home: Path,
    n_events: int,
    topic: str,
    *,
    rate: float | None = None,
    produced: dict[str, float] | None = None,
) -> int:
    """Record ~1 KB events in 50-event episodes; optionally paced and timestamped."""
    rng = random.Random(1)
    words = "the a of to and in is that for it with as on def return self import".split()
    n = 0
    start = time.monotonic()
    with EpisodeRecorder.open(bootstrap=bootstrap, home=home, worker_id=f"bench-{topic}", topic=topic) as rec:
        while n < n_events:
            with rec.episode(task={"id": f"t{n % 97}"}, policy={"id": "bench"}) as ep:
                n += 1
                for i in range(48):
                    text = " ".join(rng.choice(words) for _ in range(120))
                    if i % 3 == 0:
                        eid = ep.model_call(
                            completion=text, latency_s=0.1, prompt_tokens=300, completion_tokens=120
                        )
                    elif i % 3 == 1:
                        ep.tool_call("bash", {"command": text[:200]}, call_id=f"c{i}")
                        eid = ""
                    else:
                        eid = ep.tool_result(f"c{i - 1}", exit_code=i % 2, stdout=text)
                    n += 1
                    if produced is not None and eid:
                        produced[eid] = time.monotonic()
                    if rate:
                        ahead = n / rate - (time.monotonic() - start)
                        if ahead > 0:
                            time.sleep(ahead)
                ep.reward(judge_name="bench", judge_version="1", score=1.0, verdict="pass")
                n += 2
        rec.flush(timeout=600)
    return n


def baseline(bootstrap: str, lake_root: Path) -> tuple[int, float]:
    """The plain single process: read, parse, dedup, fold, write events/episodes/steps."""
    t0 = time.perf_counter()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        max_partition_fetch_bytes=16 << 20,
        fetch_max_bytes=64 << 20,
        max_poll_records=10000,
    )
    tps = [TopicPartition(t, p) for t in TOPICS for p in sorted(consumer.partitions_for_topic(t) or [])]
    ends = consumer.end_offsets(tps)
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    rows: dict[str, dict[str, Any]] = {}
    by_episode: dict[str, list[Any]] = {}
    remaining = {tp for tp in tps if ends[tp] > 0}
    n = 0
    while remaining:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            for r in records:
                if r.offset >= ends[tp]:
                    continue
                n += 1
                try:
                    event = parse_event(r.value)
                except SchemaError:
                    continue
                if event.event_id not in rows:
                    rows[event.event_id] = event_row(event, r.topic, r.partition, r.offset)
                    by_episode.setdefault(event.episode_id, []).append(event)
        remaining = {tp for tp in remaining if consumer.position(tp) < ends[tp]}
    consumer.close()
    lake = Lake(lake_root)
    lake.ensure(("events", "episodes", "steps"))
    txns = {f"baseline:{tp.topic}:{tp.partition}": ends[tp] - 1 for tp in tps if ends[tp] > 0}
    lake.write(
        "events",
        pa.Table.from_pylist(list(rows.values()), schema=TABLES["events"]),
        mode="insert_new",
        txns=txns,
    )
    states = [fold_episode(e, evs) for e, evs in by_episode.items()]
    lake.write(
        "episodes",
        pa.Table.from_pylist([episode_row(s) for s in states], schema=TABLES["episodes"]),
        mode="upsert",
        txns=txns,
    )
    lake.write(
        "steps",
        pa.Table.from_pylist([r for s in states for r in step_rows(s)], schema=TABLES["steps"]),
        mode="upsert",
        txns=txns,
    )
    return n, time.perf_counter() - t0


def freshness(bootstrap: str, home: Path, lake_root: Path, n_events: int, rate: float) -> list[float]:
    """Seconds from record() returning to visible in ``events`` while ``--follow`` runs."""
    cfg = PipelineConfig(
        bootstrap=bootstrap,
        lake_root=str(lake_root),
        topics=FRESH,
        worker_log=str(lake_root.parent / "workers.log"),
    )
    stop = threading.Event()
    follower = threading.Thread(target=run_follow, kwargs={"cfg": cfg, "interval_s": 0.5, "stop": stop})
    follower.start()
    produced: dict[str, float] = {}
    seen: dict[str, float] = {}
    done = threading.Event()

    def watch() -> None:
        lake = Lake(lake_root)
        while not done.is_set() or len(seen) < len(produced):
            try:
                ids = lake.read("events").column("event_id").to_pylist()
            except Exception:
                ids = []
            now = time.monotonic()
            for i in ids:
                seen.setdefault(i, now)
            if done.is_set() and all(e in seen for e in produced):
                break
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    produce(bootstrap, home, n_events, FRESH[0], rate=rate, produced=produced)
    done.set()
    watcher.join(300)
    stop.set()
    follower.join(300)
    return [seen[e] - t for e, t in produced.items() if e in seen]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="pipeline throughput vs a plain baseline, and freshness")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--freshness-events", type=int, default=1500)
    ap.add_argument("--rate", type=float, default=150.0, help="events/s produced during the freshness run")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="trajlake-bench-pipeline-"))
    broker = EmbeddedKafka(
        tmp / "home",
        f"127.0.0.1:{free_port()}",
        topics={**dict.fromkeys(TOPICS, 8), **dict.fromkeys(FRESH, 8)},
        progress=lambda m: console.print(f"[dim]{m}[/dim]"),
    )
    try:
        broker.start()
        console.print(f"producing {args.events:,} events ...")
        n = produce(broker.bootstrap, tmp / "home", args.events, TOPICS[0])
        console.print("(a) pipeline ...")
        t0 = time.perf_counter()
        batches = run_once(
            PipelineConfig(
                bootstrap=broker.bootstrap, lake_root=str(tmp / "lake-a"), worker_log=str(tmp / "workers.log")
            )
        )
        ta = time.perf_counter() - t0
        rows_a = Lake(tmp / "lake-a").read("events").num_rows
        console.print("(b) baseline ...")
        nb, tb = baseline(broker.bootstrap, tmp / "lake-b")
        rows_b = Lake(tmp / "lake-b").read("events").num_rows
        if not (rows_a == rows_b == n):
            console.print(f"[red]row counts differ: produced {n}, pipeline {rows_a}, baseline {rows_b}[/red]")
            return 1
        console.print(f"freshness: {args.freshness_events} events at {args.rate}/s with --follow ...")
        lat = freshness(broker.bootstrap, tmp / "home", tmp / "lake-fresh", args.freshness_events, args.rate)
        lat.sort()
        p50 = statistics.median(lat) if lat else float("nan")
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
        table = Table(title=f"pipeline: {n:,} events (~1 KB), one broker, one run")
        for col in ("variant", "seconds", "events/s", "batches"):
            table.add_column(col)
        table.add_row(
            "(a) Beam pipeline (6 tables, txn commits)", f"{ta:.1f}", f"{n / ta:,.0f}", str(len(batches))
        )
        table.add_row("(b) plain Python baseline (3 tables)", f"{tb:.1f}", f"{nb / tb:,.0f}", "1")
        console.print(table)
        ratio = (n / ta) / (nb / tb)
        console.print(f"a/b = {ratio:.2f} (target >= 0.5 -> {'PASS' if ratio >= 0.5 else 'MISS'})")
        console.print(
            f"freshness (--follow, interval 0.5 s): p50 {p50:.2f} s, p99 {p99:.2f} s over {len(lat)} events"
        )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "events": n,
                        "pipeline_s": ta,
                        "pipeline_eps": n / ta,
                        "batches": len(batches),
                        "baseline_s": tb,
                        "baseline_eps": nb / tb,
                        "ratio": ratio,
                        "freshness_p50_s": p50,
                        "freshness_p99_s": p99,
                        "freshness_n": len(lat),
                    },
                    indent=2,
                )
            )
        return 0
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
