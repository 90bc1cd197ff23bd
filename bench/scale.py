"""Beyond one machine: Dask vs the local runner, 3 brokers vs 1, and a large replay.

Run::

    .venv/bin/python bench/scale.py [--events 60000] [--producer-events 50000] [--replay-events 1000000]
                                    [--parts pipeline,producer,replay] [--json OUT]
    .venv/bin/python bench/scale.py --batch-latency [--max-events 1000000] [--batch-events 2000]
                                    [--json OUT] [--plot OUT.png]

One run, each comparison on the same events in the same run:

- ``pipeline``: ``run_once`` of the same log into two new lakes, Beam's local
  ``FnApiRunner`` (2 SDK worker processes) and Beam's ``DaskRunner`` on a
  ``dask.distributed`` cluster of 2 worker processes (started for the run, like
  ``--runner dask`` without ``--scheduler``): events/s, the ratio, and that the
  two lakes are equal.
- ``producer``: the recorder's producer (``acks=all``, idempotent) sending the
  same records to a 3-broker cluster (replication 3, ``min.insync.replicas`` 2)
  and to a single broker: events/s and the ratio.
- ``replay``: ``--replay-events`` events produced to a topic, then
  ``pipelines.replay`` into a new lake (every table, local runner): seconds,
  events/s, and the time per stage class.
- ``--batch-latency`` (alone): a fresh lake grown to ``--max-events``; at sizes
  growing about x3 a batch of ``--batch-events`` new events is timed through
  ``run_once`` and another one counts the files its reads and merges open
  (DataFusion's and delta-rs's own metrics); ``--json`` gets the list of
  ``{lake_events, batch_s, files_read}`` points, and the slope is printed.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this folder holds ingest.py etc.: keep it from shadowing the packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the workloads live in tests/


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _records(n: int, seed: int = 3) -> list[tuple[str, bytes, bytes]]:
    """``n`` events of 40-event episodes with model calls and tool output, as the wire has them."""
    import random

    from tests.pipelines.factories import call, ended, model, result, reward, started, wire

    rng = random.Random(seed)
    out: list[tuple[str, bytes, bytes]] = []
    ep = 0
    while len(out) < n:
        eid = f"ep-{seed}-{ep:08d}"
        docs = [started(eid, task=f"t{ep % 97}")]
        seq = 1
        for s in range(12):
            docs.append(model(eid, seq, completion="x" * rng.randint(100, 600), prompt_token_ids=[1, 2, 3],
                              completion_token_ids=[4, 5], completion_logprobs=[-0.1, -0.2]))  # fmt: skip
            docs.append(call(eid, seq + 1, call_id=f"c{s}"))
            docs.append(result(eid, seq + 2, call_id=f"c{s}", stdout="ok " * rng.randint(5, 200)))
            seq += 3
        docs += [reward(eid, seq), ended(eid, seq + 1)]
        out += [("trajlake.episodes", eid.encode(), wire(d)) for d in docs]
        ep += 1
    return out[:n]


def _produce(bootstrap: str, records: list[tuple[str, bytes, bytes]]) -> float:
    """Send with the recorder's producer settings; return seconds until all acknowledged."""
    from ingest.kafka_sink import KafkaSink, KafkaSinkConfig

    sink = KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, client_id="bench-scale"))
    t0 = time.perf_counter()
    try:
        receipts = [sink.send(t, k, v) for t, k, v in records]
        sink.flush(timeout=600)
        failed = [r.exception for r in receipts if not r.is_done or r.exception is not None]
        if failed:
            raise RuntimeError(f"{len(failed)} records not acknowledged: {failed[:1]}")
    finally:
        sink.close()
    return time.perf_counter() - t0


def bench_pipeline(n: int) -> dict[str, Any]:
    from ingest.kafka_broker import EmbeddedKafka
    from lake import Lake, diff_lakes
    from pipelines import PipelineConfig, run_once

    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedKafka(Path(tmp) / "home", f"127.0.0.1:{_port()}")
        broker.start()
        try:
            from tests.pipelines.log_workload import produce

            produce(broker.bootstrap, _records(n))
            out: dict[str, Any] = {"events": n}
            for runner in ("local", "dask"):
                cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=f"{tmp}/{runner}", runner=runner)
                t0 = time.perf_counter()
                run_once(cfg)
                out[runner] = {"seconds": time.perf_counter() - t0}
                out[runner]["events_per_s"] = n / out[runner]["seconds"]
                print(f"pipeline {runner}: {n} events in {out[runner]['seconds']:.1f}s", flush=True)
            out["dask_vs_local"] = out["dask"]["events_per_s"] / out["local"]["events_per_s"]
            out["lakes_equal"] = all(d.equal for d in diff_lakes(Lake(f"{tmp}/local"), Lake(f"{tmp}/dask")))
            return out
        finally:
            broker.stop()


def bench_producer(n: int) -> dict[str, Any]:
    from ingest.kafka_broker import EmbeddedKafka
    from ingest.kafka_cluster import KafkaCluster

    records = _records(n, seed=5)
    out: dict[str, Any] = {"events": n}
    with tempfile.TemporaryDirectory() as tmp:
        for name, kafka in (
            ("one_broker", EmbeddedKafka(Path(tmp) / "one", f"127.0.0.1:{_port()}")),
            ("three_brokers", KafkaCluster(Path(tmp) / "three", f"127.0.0.1:{_port()}", brokers=3)),
        ):
            kafka.start()
            try:
                _produce(kafka.bootstrap, records[: n // 10])  # warm up connections and the JIT
                seconds = _produce(kafka.bootstrap, records)
            finally:
                kafka.stop()
            out[name] = {"seconds": seconds, "events_per_s": n / seconds}
            print(f"producer {name}: {n} events acknowledged in {seconds:.1f}s", flush=True)
    out["three_vs_one"] = out["three_brokers"]["events_per_s"] / out["one_broker"]["events_per_s"]
    return out


def bench_replay(n: int) -> dict[str, Any]:
    from ingest.kafka_broker import EmbeddedKafka
    from pipelines import PipelineConfig, replay

    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedKafka(Path(tmp) / "home", f"127.0.0.1:{_port()}", heap="1g")
        broker.start()
        try:
            from tests.pipelines.log_workload import produce

            t0 = time.perf_counter()
            for i in range(0, n, 100_000):
                produce(broker.bootstrap, _records(min(100_000, n - i), seed=100 + i))
            produced = time.perf_counter() - t0
            print(f"replay: {n} events produced in {produced:.0f}s", flush=True)
            batches: list[dict[str, Any]] = []
            t0 = time.perf_counter()
            replay(
                PipelineConfig(bootstrap=broker.bootstrap, lake_root=f"{tmp}/replayed"),
                on_batch=lambda b: batches.append({"records": b.records, "seconds": b.seconds}),
            )
            seconds = time.perf_counter() - t0
            print(f"replay: {n} events into every table in {seconds:.0f}s ({n / seconds:.0f} events/s)",
                  flush=True)  # fmt: skip
            return {"events": n, "seconds": seconds, "events_per_s": n / seconds, "batches": batches}
        finally:
            broker.stop()


def _lake_sizes(max_events: int, first: int) -> list[int]:
    """Lake sizes to measure at: 0, ``first``, then about x3 each, ending at ``max_events``."""
    sizes, n = [0], first
    while n < max_events:
        sizes.append(n)
        n = n * 3 if n * 3 < max_events else max_events
    return [*sizes, max_events]


def bench_batch_latency(
    max_events: int, batch: int = 2000, first: int = 20_000, chunk: int = 250_000, repeats: int = 3
) -> list[dict[str, Any]]:
    """Grow a fresh lake to ``max_events`` and time a constant batch of ``batch`` events at each size.

    Growth goes through the pipeline too (``run_once`` over chunks of up to ``chunk`` events). At
    each size ``repeats`` batches of new episodes are timed (``batch_s``: the median ``run_once``), one
    with ``TRAJLAKE_SCAN_LOG`` set, whose reads and merges report the files they opened from
    DataFusion's and delta-rs's own metrics (``files_read``; their ``EXPLAIN ANALYZE`` would skew
    the timing, hence the second batch).
    """
    import os

    from ingest.kafka_broker import EmbeddedKafka
    from lake import Lake
    from lake.store import SCAN_LOG_ENV
    from pipelines import PipelineConfig, run_once
    from tests.pipelines.log_workload import produce

    points: list[dict[str, Any]] = []
    seed = 1000  # episode ids ep-<seed>-<n>: later seeds sort later, like time-ordered ids
    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedKafka(Path(tmp) / "home", f"127.0.0.1:{_port()}", heap="1g")
        broker.start()
        try:
            cfg = PipelineConfig(bootstrap=broker.bootstrap, lake_root=f"{tmp}/lake")
            size = 0
            for target in _lake_sizes(max_events, first):
                while size < target:
                    n = min(chunk, target - size)
                    produce(broker.bootstrap, _records(n, seed=seed))
                    seed += 1
                    t0 = time.perf_counter()
                    run_once(cfg)
                    size += n
                    rate = n / (time.perf_counter() - t0)
                    print(f"batch-latency: lake grown to {size:,} events ({rate:,.0f} events/s)", flush=True)
                times = []
                for _ in range(repeats):
                    produce(broker.bootstrap, _records(batch, seed=seed))
                    seed += 1
                    t0 = time.perf_counter()
                    run_once(cfg)
                    times.append(time.perf_counter() - t0)
                    size += batch
                batch_s = sorted(times)[len(times) // 2]
                produce(broker.bootstrap, _records(batch, seed=seed))
                seed += 1
                log = Path(tmp) / f"scans-{size}.jsonl"
                os.environ[SCAN_LOG_ENV] = str(log)
                try:
                    run_once(cfg)
                finally:
                    del os.environ[SCAN_LOG_ENV]
                size += batch
                scans = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
                files = {t: 0 for t in sorted({s["table"] for s in scans})}
                for s in scans:
                    files[s["table"]] += int(s["files"])
                lake = Lake(cfg.lake_root)
                point = {
                    "lake_events": size - (repeats + 1) * batch,
                    "batch_events": batch,
                    "batch_s": round(batch_s, 3),
                    "batch_s_each": [round(t, 3) for t in times],
                    "files_read": sum(files.values())
                    if log.exists()
                    else None,  # None: a lake that logs no scans
                    "files_read_by_table": files,
                    "events_table_files": len(lake.table("events").file_uris()),
                }
                points.append(point)
                print("batch-latency", json.dumps(point), flush=True)
        finally:
            broker.stop()
    return points


def _plot_latency(points: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [max(p["lake_events"], 1) for p in points]
    ax.plot(xs, [p["batch_s"] for p in points], "o-", label="seconds per batch")
    ax.set_xscale("log")
    ax.set_xlabel("events in the lake")
    ax.set_ylabel(f"seconds per batch of {points[0]['batch_events']:,} events")
    ax2 = ax.twinx()
    ax2.plot(xs, [p["files_read"] or 0 for p in points], "s--", color="tab:orange", label="files read")
    ax2.set_ylabel("files read per batch")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(0, max(p["files_read"] or 0 for p in points) + 2)
    fig.legend(loc="lower right", bbox_to_anchor=(0.88, 0.15))
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def _slope(points: list[dict[str, Any]]) -> dict[str, float]:
    """Least-squares seconds per million lake events, and the last batch over the first."""
    import statistics

    xs = [p["lake_events"] / 1e6 for p in points]
    ys = [p["batch_s"] for p in points]
    fit = statistics.linear_regression(xs, ys) if len(points) > 1 else None
    return {
        "s_per_million_events": fit.slope if fit else 0.0,
        "last_over_first": ys[-1] / ys[0] if ys and ys[0] else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--producer-events", type=int, default=50_000)
    ap.add_argument("--replay-events", type=int, default=1_000_000)
    ap.add_argument("--parts", default="pipeline,producer,replay")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--batch-latency", action="store_true",
                    help="only: grow a fresh lake and time a constant batch at each size")  # fmt: skip
    ap.add_argument(
        "--max-events", type=int, default=1_000_000, help="--batch-latency: the lake's final size"
    )
    ap.add_argument("--batch-events", type=int, default=2000, help="--batch-latency: events per timed batch")
    ap.add_argument("--plot", type=Path, help="--batch-latency: write the curve as a PNG")
    args = ap.parse_args()
    if args.batch_latency:
        points = bench_batch_latency(args.max_events, args.batch_events)
        slope = _slope(points)
        print("batch-latency slope", json.dumps(slope), flush=True)
        if args.plot:
            _plot_latency(points, args.plot)
        if args.json:
            args.json.write_text(json.dumps(points, indent=2))
        return
    parts = args.parts.split(",")
    res: dict[str, Any] = {}
    if "pipeline" in parts:
        res["pipeline"] = bench_pipeline(args.events)
        print("pipeline", json.dumps(res["pipeline"]), flush=True)
    if "producer" in parts:
        res["producer"] = bench_producer(args.producer_events)
        print("producer", json.dumps(res["producer"]), flush=True)
    if "replay" in parts:
        res["replay"] = bench_replay(args.replay_events)
        print("replay", json.dumps({k: v for k, v in res["replay"].items() if k != "batches"}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
