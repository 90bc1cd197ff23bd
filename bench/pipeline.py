"""Pipeline throughput and freshness: the Beam pipeline against a plain baseline and Spark.

Run::

    .venv/bin/python bench/pipeline.py [--events 200000] [--freshness-events 1500] [--rate 150]
        [--skip-freshness] [--skip-spark] [--spark-timeout 600] [--executor auto|beam|eager]
        [--eager-workers N] [--json OUT]

One run, one broker (started here on a free port), the same ~1 KB events
(50-event episodes on ``trajlake.episodes``) read by every row from the earliest
offset into a fresh Delta table:

``trajlake``
    ``pipelines.run_once`` (its defaults: a batch of 100k records or more on Beam's local
    FnApiRunner and its 2 worker processes, a smaller one on ``pipelines.eager``): Kafka ->
    parse/validate -> dedup -> ``events`` -> fold touched episodes -> ``episodes``, ``steps``
    (and also ``quarantine``, ``rewards``, ``failures``, which the others skip), every table
    committed with its ``txn`` actions.
``plain``
    one plain Python process doing the same reads (kafka-python consumer to the
    end offsets), the same parsing and validation (``parse_event``), dedup by
    ``event_id``, the same fold (``fold_episode`` -> ``episode_row``/``step_rows``)
    and Delta writes of ``events``, ``episodes``, ``steps`` with deltalake, no Beam.
``spark_cold``
    the peer engine: Spark Structured Streaming (``local[2]``, the session
    ``pipelines.spark_lake.SparkLake`` builds, with Delta) reading the same topics
    from ``earliest`` with ``trigger(availableNow=True)``, ``from_json`` of the
    event envelope into columns (``producer`` and ``payload`` kept as JSON
    strings, as in ``events``) plus ``event_date``, topic, partition and offset,
    appended to a new Delta table with its checkpoint. Bronze only: no
    validation, no dedup, no fold. The time includes starting the JVM and the
    SparkSession (the jars are resolved by Maven before the clock starts: the
    Delta jars through ``infra/spark/pom.xml``, the Kafka source through
    ``infra/spark_kafka/pom.xml``).
``spark_warm``
    the same query again in the already started session, into a fresh Delta
    path with a fresh checkpoint.

Each row has ``seconds``, ``events`` and ``events_per_s``; a Spark row that could
not run (no Java, Maven failed, the query failed) is ``{"error": ...}`` and the
other rows still run. Spark's rows are checked to hold every produced event.
Ratios: trajlake / spark_warm (goal >= 1.0) and trajlake / plain.

Then, unless ``--skip-freshness``, freshness in ``--follow`` mode: a pipeline
follows two fresh topics while a recorder produces events at a steady rate; for
each event, the seconds from ``record()`` returning to the event being visible in
the ``events`` table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this folder holds ingest.py etc.: keep it from shadowing the packages

import pyarrow as pa  # noqa: E402
from kafka import KafkaConsumer, TopicPartition  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from fold.projection import episode_row, fold_episode, step_rows  # noqa: E402
from fold.rows import event_row  # noqa: E402
from ingest import EpisodeRecorder  # noqa: E402
from ingest.kafka_broker import EmbeddedKafka  # noqa: E402
from lake import Lake  # noqa: E402
from pipelines import PipelineConfig, run_follow, run_once  # noqa: E402
from pipelines.spark_lake import SparkLake, SparkUnavailableError  # noqa: E402
from schemas import TABLES, SchemaError, parse_event  # noqa: E402

console = Console(width=120)
TOPICS = ("trajlake.episodes", "trajlake.judgements")
FRESH = ("fresh.episodes", "fresh.judgements")
ENVELOPE = (
    "event_id STRING, episode_id STRING, seq BIGINT, type STRING, ts TIMESTAMP, "
    "schema_version INT, producer STRING, payload STRING"
)
"""The event envelope (``schemas.events.EventBase`` + type, version, payload) as Spark parses the
value: a ``STRING`` field holding a JSON object keeps the object's JSON text, as ``events`` does."""


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
        st = rec.delivery.stats
        if st.damaged or st.torn or st.rejected:
            console.print(
                f"[red]the spool skipped records as damage: {st}; see {home}/spool/*/quarantine[/red]"
            )
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


def freshness(
    bootstrap: str, home: Path, lake_root: Path, n_events: int, rate: float
) -> tuple[list[float], int]:
    """Seconds from record() returning to visible in ``events`` while ``--follow`` runs, per event
    seen; and how many were never seen."""
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
        # until every produced event is seen (or 120 s after the last was produced): stopping at
        # "as many ids seen as produced" counted the episodes' other events and dropped the tail
        lake = Lake(lake_root)
        deadline: float | None = None
        while True:
            try:
                ids = lake.read("events", columns=["event_id"]).column("event_id").to_pylist()
            except Exception:
                ids = []
            now = time.monotonic()
            for i in ids:
                seen.setdefault(i, now)
            if done.is_set():
                if all(e in seen for e in produced):
                    break
                deadline = deadline or now + 120
                if now > deadline:
                    break
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    produce(bootstrap, home, n_events, FRESH[0], rate=rate, produced=produced)
    done.set()
    watcher.join(300)
    stop.set()
    follower.join(300)
    missing = sum(1 for e in produced if e not in seen)
    if missing:
        console.print(f"[red]freshness: {missing} of {len(produced)} events never became visible[/red]")
    return [seen[e] - t for e, t in produced.items() if e in seen], missing


def spark_kafka_jars(progress: Callable[[str], None] | None = None) -> list[str]:
    """Spark's Kafka source (``infra/spark_kafka/pom.xml``), resolved by Maven once and cached.

    Raises:
        SparkUnavailableError: Maven is missing or could not resolve the jars.
    """
    from infra.maven import MavenError, build_classpath, pom_path

    pom = pom_path("spark_kafka")
    try:
        return build_classpath(
            pom,
            "Spark's Kafka source (spark-sql-kafka)",
            progress,
            settings=pom.parent / "settings.xml",
            timeout_s=600,
        )
    except MavenError as exc:
        raise SparkUnavailableError(str(exc)) from exc


class SparkPeer:
    """A :class:`SparkLake` session with Spark's Kafka source on the driver's classpath.

    ``SparkLake`` builds the session (Delta extensions, local master, quiet, small
    shuffles, UTC) with the Delta jars as ``spark.jars``; the Kafka jars go on the
    JVM's own classpath (``--driver-class-path``: in local mode the driver runs the
    tasks too), given to the JVM Spark launches through ``PYSPARK_SUBMIT_ARGS``.
    """

    def __init__(self, root: Path, kafka_jars: list[str], progress: Callable[[str], None]) -> None:
        self.lake = SparkLake(root, master="local[2]", progress=progress)
        self.kafka_jars = kafka_jars

    def start(self) -> Any:
        """Start the JVM and the session (the cold part of ``spark_cold``)."""
        before = os.environ.get("PYSPARK_SUBMIT_ARGS")
        os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join(
            ["--driver-class-path", os.pathsep.join(self.kafka_jars), before or "pyspark-shell"]
        )
        try:
            return self.lake.spark
        finally:
            if before is None:
                os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
            else:
                os.environ["PYSPARK_SUBMIT_ARGS"] = before

    def bronze(self, bootstrap: str, table: Path, checkpoint: Path, timeout_s: float) -> None:
        """Kafka (earliest, available now) -> from_json of the envelope -> a new Delta table."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's own idiom

        spark = self.start()
        raw = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ",".join(TOPICS))
            .option("startingOffsets", "earliest")
            .load()
        )
        e = F.from_json(F.col("value").cast("string"), ENVELOPE).alias("e")
        rows = raw.select(e, "topic", "partition", "offset").select(
            *(f"e.{c}" for c in ("event_id", "episode_id", "seq", "type", "ts")),
            F.to_date("e.ts").alias("event_date"),
            *(f"e.{c}" for c in ("schema_version", "producer", "payload")),
            "topic",
            "partition",
            "offset",
        )
        query = (
            rows.writeStream.format("delta")
            .option("checkpointLocation", str(checkpoint))
            .partitionBy("event_date")
            .trigger(availableNow=True)
            .start(str(table))
        )
        if not query.awaitTermination(timeout_s):
            query.stop()
            raise TimeoutError(f"the Spark query did not finish within {timeout_s:.0f} s")

    def count(self, table: Path) -> tuple[int, int]:
        """Rows in ``table`` and those whose envelope parsed (event_id and ts not null)."""
        from pyspark.sql import functions as F  # noqa: N812

        df = self.lake.spark.read.format("delta").load(str(table))
        row = df.select(
            F.count("*"), F.count(F.when(F.col("event_id").isNotNull() & F.col("ts").isNotNull(), 1))
        )
        total, parsed = row.collect()[0]
        return int(total), int(parsed)

    def close(self) -> None:
        self.lake.close()


def _one_sentence(exc: BaseException) -> str:
    """The first line of an exception's message, short enough for a table cell."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    if text.endswith(":") and len(lines) > 1:  # "Maven could not resolve X:" + Maven's output: its error
        text = f"{text} {next((ln for ln in lines[1:] if 'ERROR' in ln), lines[1])}"
    if not isinstance(exc, SparkUnavailableError):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= 240 else text[:237] + "..."


def spark_rows(bootstrap: str, tmp: Path, n: int, timeout_s: float) -> dict[str, dict[str, Any]]:
    """``spark_cold`` and ``spark_warm``; a row that could not run is ``{"error": ...}``."""
    out: dict[str, dict[str, Any]] = {}
    peer: SparkPeer | None = None
    progress = lambda m: console.print(f"[dim]{m}[/dim]")  # noqa: E731
    try:
        # Resolving jars (Maven, first run only) is set-up, not engine time: before the clock.
        from pipelines.spark_lake import delta_jars

        delta_jars(progress)
        peer = SparkPeer(tmp / "spark", spark_kafka_jars(progress), progress)
        for name in ("spark_cold", "spark_warm"):
            console.print(f"{name} ...")
            table, checkpoint = tmp / f"{name}-events", tmp / f"{name}-checkpoint"
            try:
                t0 = time.perf_counter()
                peer.bronze(bootstrap, table, checkpoint, timeout_s)
                seconds = time.perf_counter() - t0
                written, parsed = peer.count(table)
            except Exception as exc:  # noqa: BLE001 - py4j/JVM errors have no common type
                out[name] = {"error": _one_sentence(exc)}
                if isinstance(exc, SparkUnavailableError):
                    break
                continue
            row: dict[str, Any] = {
                "seconds": seconds,
                "events": n,
                "events_per_s": n / seconds,
                "rows_written": written,
            }
            if written != n or parsed != n:
                row["warning"] = f"produced {n}, Spark wrote {written} rows ({parsed} with a parsed envelope)"
            out[name] = row
    except Exception as exc:  # noqa: BLE001 - whatever stops Spark, the other rows stand
        error = {"error": _one_sentence(exc)}
        for name in ("spark_cold", "spark_warm"):
            out.setdefault(name, error)
    finally:
        if peer is not None:
            try:
                peer.close()
            except Exception:  # noqa: BLE001, S110 - a session that failed to start has nothing to stop
                pass
    for name in ("spark_cold", "spark_warm"):
        out.setdefault(name, out.get("spark_cold", {"error": "not run"}))
    return out


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    if "events_per_s" in a and "events_per_s" in b:
        return float(a["events_per_s"]) / float(b["events_per_s"])
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="pipeline throughput vs a plain baseline and Spark, and freshness"
    )
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--freshness-events", type=int, default=1500)
    ap.add_argument("--rate", type=float, default=150.0, help="events/s produced during the freshness run")
    ap.add_argument("--skip-freshness", action="store_true", help="skip the --follow freshness run")
    ap.add_argument("--skip-spark", action="store_true", help="record the Spark rows as skipped")
    ap.add_argument("--spark-timeout", type=float, default=600.0, help="seconds each Spark query may run")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--eager-workers", type=int, default=-1,
        help="the trajlake row's worker processes beside the eager executor (-1: one per other core)",
    )  # fmt: skip
    ap.add_argument(
        "--executor", default="auto", choices=("auto", "beam", "eager"),
        help="the trajlake row's executor (PipelineConfig.executor)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="trajlake-bench-pipeline-"))
    broker = EmbeddedKafka(
        tmp / "home",
        f"127.0.0.1:{free_port()}",
        topics={**dict.fromkeys(TOPICS, 8), **dict.fromkeys(FRESH, 8)},
        progress=lambda m: console.print(f"[dim]{m}[/dim]"),
    )
    ok = True
    try:
        broker.start()
        console.print(f"producing {args.events:,} events ...")
        n = produce(broker.bootstrap, tmp / "home", args.events, TOPICS[0])

        def trajlake(lake: str) -> tuple[int, float, int]:
            """One ``run_once`` into a fresh lake: its batches, seconds and ``events`` rows."""
            t0 = time.perf_counter()
            batches = run_once(
                PipelineConfig(
                    bootstrap=broker.bootstrap,
                    lake_root=str(tmp / lake),
                    worker_log=str(tmp / "workers.log"),
                    executor=args.executor,
                    eager_workers=args.eager_workers,
                )
            )
            seconds = time.perf_counter() - t0
            return len(batches), seconds, Lake(tmp / lake).read("events").num_rows

        console.print("trajlake (Beam pipeline) ...")
        n_batches, ta, rows_a = trajlake("lake-a")
        # The same run again in this process, into a lake of its own: modules imported and the
        # worker processes started, as spark_warm's session is (like for like with it).
        console.print("trajlake again, warm (a fresh lake, the same process) ...")
        warm_batches, tw, rows_w = trajlake("lake-warm")
        console.print("plain (Python + deltalake baseline) ...")
        nb, tb = baseline(broker.bootstrap, tmp / "lake-b")
        rows_b = Lake(tmp / "lake-b").read("events").num_rows
        rows: dict[str, dict[str, Any]] = {
            "trajlake": {"seconds": ta, "events": n, "events_per_s": n / ta, "batches": n_batches},
            "plain": {"seconds": tb, "events": nb, "events_per_s": nb / tb},
            "trajlake_warm": {"seconds": tw, "events": n, "events_per_s": n / tw, "batches": warm_batches},
        }
        if rows_w != n:
            ok = False
            rows["trajlake_warm"]["warning"] = f"produced {n}, events table has {rows_w} rows"
        if not (rows_a == rows_b == n):
            console.print(f"[red]row counts differ: produced {n}, pipeline {rows_a}, baseline {rows_b}[/red]")
            rows["trajlake"]["warning"] = f"produced {n}, events table has {rows_a} rows"
            rows["plain"]["warning"] = f"produced {n}, events table has {rows_b} rows"
            ok = False
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
            ends = consumer.end_offsets([TopicPartition(TOPICS[0], p) for p in range(8)])
            consumer.close()
            console.print(f"[red]Kafka end offsets {sorted(ends.values())} (sum {sum(ends.values())})[/red]")
        if args.skip_spark:
            rows.update(dict.fromkeys(("spark_cold", "spark_warm"), {"error": "skipped (--skip-spark)"}))
        else:
            rows.update(spark_rows(broker.bootstrap, tmp, n, args.spark_timeout))

        table = Table(title=f"pipeline: {n:,} events (~1 KB), one broker, one run")
        for col in ("row", "what", "seconds", "events", "events/s", "notes"):
            table.add_column(col, justify="right" if col in ("seconds", "events", "events/s") else "left")
        what = {
            "trajlake": "Beam pipeline (6 tables, txn commits)",
            "trajlake_warm": "the same, again in the same process",
            "plain": "plain Python + deltalake (3 tables)",
            "spark_cold": "Spark SS Kafka->Delta bronze, JVM start incl.",
            "spark_warm": "Spark SS Kafka->Delta bronze, warm session",
        }
        for name, row in rows.items():
            if "error" in row:
                table.add_row(name, what[name], "-", "-", "-", f"[red]error: {row['error']}[/red]")
                continue
            notes = f"{row['batches']} batches" if "batches" in row else ""
            if "warning" in row:
                notes = f"[yellow]WARNING: {row['warning']}[/yellow]"
            table.add_row(
                name,
                what[name],
                f"{row['seconds']:.1f}",
                f"{row['events']:,}",
                f"{row['events_per_s']:,.0f}",
                notes,
            )
        console.print(table)
        ratios = {
            "trajlake/spark_warm": _ratio(rows["trajlake"], rows["spark_warm"]),
            "trajlake_warm/spark_warm": _ratio(rows["trajlake_warm"], rows["spark_warm"]),
            "trajlake/spark_cold": _ratio(rows["trajlake"], rows["spark_cold"]),
            "trajlake/plain": _ratio(rows["trajlake"], rows["plain"]),
        }
        goals = {"trajlake/spark_warm": 1.0, "trajlake/plain": 0.5}
        for key, value in ratios.items():
            if value is None:
                console.print(f"{key} = n/a (a row has no result)")
            elif key in goals:
                verdict = "PASS" if value >= goals[key] else "MISS"
                console.print(f"{key} = {value:.2f} (goal >= {goals[key]} -> {verdict})")
            else:
                console.print(f"{key} = {value:.2f}")

        fresh: dict[str, Any] | None = None
        if not args.skip_freshness:
            console.print(f"freshness: {args.freshness_events} events at {args.rate}/s with --follow ...")
            lat, missing = freshness(
                broker.bootstrap, tmp / "home", tmp / "lake-fresh", args.freshness_events, args.rate
            )
            lat.sort()
            p50 = statistics.median(lat) if lat else float("nan")
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
            fresh = {
                "freshness_p50_s": p50,
                "freshness_p99_s": p99,
                "freshness_n": len(lat),
                "freshness_missing": missing,
                "freshness_goal_p99_s": 2.0,
            }
            console.print(
                f"freshness (--follow, interval 0.5 s): p50 {p50:.2f} s, p99 {p99:.2f} s"
                f" over {len(lat)} events (goal p99 <= 2.0 s -> {'ok' if p99 <= 2.0 else 'MISS'})"
            )
        if args.json:
            out: dict[str, Any] = {
                "events": n,
                "rows": rows,
                "ratios": ratios,
                **rows,
                # the keys of earlier versions of this bench
                "pipeline_s": ta,
                "pipeline_eps": n / ta,
                "batches": n_batches,
                "baseline_s": tb,
                "baseline_eps": nb / tb,
                "ratio": ratios["trajlake/plain"],
                "freshness": fresh,
                **(fresh or {}),
            }
            args.json.write_text(json.dumps(out, indent=2))
        return 0 if ok else 1
    finally:
        broker.stop()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:  # the spool's quarantine, shipper.log and both lakes say where events went
            console.print(f"[red]kept {tmp} for inspection[/red]")


if __name__ == "__main__":
    sys.exit(main())
