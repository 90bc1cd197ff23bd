"""The fault-injection run: workers record through a 3-broker cluster while processes are SIGKILLed.

Modelled on Kafka's own system tests and kafka-delta-ingest's exactly-once tests. Per seed:
worker processes record episodes through :class:`ingest.EpisodeRecorder` (each keeps a
ledger of what ``record`` acknowledged), a pipeline folds the topic into a lake, local runner
or Dask in turn, and at random moments (from the seed) SIGKILL hits a worker, a shipper, the
pipeline, a Dask worker, one broker (restarted later) or the whole cluster (restarted). Then:
the ``event_id`` set of ``events`` equals the acknowledged set (nothing lost), no ``event_id``
twice, each episode's events a gap-free ``seq`` run, and every table equal to a clean replay.

``python -m tests.reliability.chaos --seeds N`` runs N seeds and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest import EpisodeRecorder
from ingest.kafka_cluster import KafkaCluster
from lake import Lake, diff_lakes
from pipelines import PipelineConfig, replay, run_once

KINDS = ("worker", "shipper", "pipeline", "pipeline_dask", "dask_worker", "broker", "cluster")

PIPELINE = """
import sys, time
from pipelines import PipelineConfig, run_once
bootstrap, lake, topic, runner = sys.argv[1:5]
cfg = PipelineConfig(bootstrap=bootstrap, lake_root=lake, topics=(topic,), control_topics={},
                     max_batch_per_partition=400, runner=runner, num_workers=2)
while True:
    try:
        run_once(cfg)
    except Exception as exc:  # the cluster may be down: the next round goes on from the lake's offsets
        print(f"round failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    time.sleep(0.5)
"""


@dataclass
class SeedResult:
    """One seed's row of the table."""

    seed: int
    faults: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    in_lake: int = 0
    lost: int = 0
    duplicated: int = 0
    gaps: int = 0
    replay_equal: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing twice, no gap, the lake a projection of the log."""
        return not self.lost and not self.duplicated and not self.gaps and self.replay_equal


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in parents.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill(pid: int, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


class Chaos:
    """The processes of one seed and the faults applied to them."""

    def __init__(self, cluster: KafkaCluster, root: Path, seed: int, *, workers: int = 3) -> None:
        self.cluster = cluster
        self.root = root
        self.seed = seed
        self.rng = random.Random(seed)
        self.topic = f"chaos.{seed}.{random.getrandbits(24):06x}"
        self.lake = str(root / "lake")
        self.ledgers = [root / f"ledger-{i}.txt" for i in range(workers)]
        self.stop_file = root / "STOP"
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * workers
        self.pipeline: subprocess.Popen[bytes] | None = None
        self.broker_down: int | None = None
        self.cluster_down = False
        self.result = SeedResult(seed)

    # ------------------------------------------------------------- processes

    def _start_worker(self, i: int) -> None:
        self.workers[i] = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.worker", self.cluster.bootstrap, str(self.root),
             f"w{self.seed}-{i}", self.topic, str(self.ledgers[i]), str(self.stop_file)],
            stdout=subprocess.DEVNULL, stderr=open(self.root / f"worker-{i}.log", "ab"),  # noqa: SIM115
        )  # fmt: skip

    def _start_pipeline(self) -> None:
        runner = self.rng.choice(["local", "dask"])
        self.pipeline = subprocess.Popen(
            [sys.executable, "-c", PIPELINE, self.cluster.bootstrap, self.lake, self.topic, runner],
            stdout=open(self.root / "pipeline.log", "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115
            start_new_session=True,  # its SDK or Dask workers die with it
        )  # fmt: skip
        self.pipeline_runner = runner

    # ------------------------------------------------------------- faults

    def fault(self) -> str | None:
        """One random fault (what it hit), the things it keeps down restarted at the next ones."""
        kinds = list(KINDS)
        if self.pipeline_runner != "dask":
            kinds.remove("dask_worker")
            kinds.remove("pipeline_dask")
        else:
            kinds.remove("pipeline")
        if self.broker_down is not None or self.cluster_down:
            kinds = [k for k in kinds if k not in ("broker", "cluster")]
        kind = self.rng.choice(kinds)
        if kind == "worker":
            i = self.rng.randrange(len(self.workers))
            w = self.workers[i]
            if w is None or w.poll() is not None:
                return None
            _kill(w.pid)  # the shipper, in its own session, outlives it and ships what it left
            w.wait()
            self._start_worker(i)  # the same worker id: its spool is picked up again
        elif kind == "shipper":
            shippers = [p for p in _shippers() if f"w{self.seed}-" in _cmdline(p)]
            if not shippers:
                return None
            _kill(self.rng.choice(shippers))  # the worker's delivery starts another
        elif kind in ("pipeline", "pipeline_dask"):
            if self.pipeline is None:
                return None
            _kill(self.pipeline.pid, group=True)
            self.pipeline.wait()
            self._start_pipeline()
        elif kind == "dask_worker":
            assert self.pipeline is not None
            dask = [p for p in _children(self.pipeline.pid) if "spawn_main" in _cmdline(p)]
            if not dask:
                return None
            _kill(self.rng.choice(dask))  # the nanny starts another; its tasks run again
        elif kind == "broker":
            self.broker_down = self.rng.choice(sorted(self.cluster.nodes))
            self.cluster.kill(self.broker_down)
        elif kind == "cluster":
            self.cluster.kill()
            self.cluster_down = True
        self.result.faults[kind] += 1
        return kind

    def heal(self) -> None:
        """Bring back a broker or the cluster that a fault took down."""
        if self.cluster_down or self.broker_down is not None:
            self.cluster.start()
            self.cluster_down, self.broker_down = False, None

    # ------------------------------------------------------------- one seed

    def run(self, *, window_s: float = 30.0) -> SeedResult:
        """Record under faults for ``window_s``, then settle and check."""
        try:
            return self._run(window_s)
        finally:  # a seed that failed leaves nothing running to slow the next one (or the test run)
            self.stop_file.touch()
            for w in self.workers:
                if w is not None and w.poll() is None:
                    _kill(w.pid)
                    w.wait()
            if self.pipeline is not None and self.pipeline.poll() is None:
                _kill(self.pipeline.pid, group=True)
                self.pipeline.wait()
            for pid in _shippers():
                if str(self.root) in _cmdline(pid):
                    _kill(pid)

    def _run(self, window_s: float) -> SeedResult:
        t0 = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap)
        try:
            admin.create_topics([NewTopic(self.topic, 4, 3, topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        for i in range(len(self.workers)):
            self._start_worker(i)
        self._start_pipeline()
        deadline = time.monotonic() + window_s
        while time.monotonic() < deadline:
            time.sleep(self.rng.uniform(0.8, 3.0))
            if self.rng.random() < 0.5:
                self.heal()  # a broker or the cluster stays down a while, then comes back
            self.fault()
        self.heal()
        self.stop_file.touch()
        for i, w in enumerate(self.workers):
            if w is not None and w.wait(240) != 0:
                raise AssertionError(
                    f"worker {i} failed: {(self.root / f'worker-{i}.log').read_text()[-2000:]}"
                )
        if self.pipeline is not None:
            _kill(self.pipeline.pid, group=True)
            self.pipeline.wait()
        for i in range(len(self.workers)):  # what a killed worker's spool still holds goes out now
            worker = f"w{self.seed}-{i}"
            rec = EpisodeRecorder.open(bootstrap=self.cluster.bootstrap, home=self.root, worker_id=worker,
                                       topic=self.topic)  # fmt: skip
            rec.flush(timeout=180)
            rec.close()
        cfg = PipelineConfig(bootstrap=self.cluster.bootstrap, lake_root=self.lake, topics=(self.topic,),
                             control_topics={})  # fmt: skip
        run_once(cfg)
        self._check(cfg)
        self.result.seconds = time.monotonic() - t0
        return self.result

    def _check(self, cfg: PipelineConfig) -> None:
        acked: set[str] = set()
        for ledger in self.ledgers:
            acked |= {line.strip() for line in ledger.read_text().splitlines() if line.strip()}
        lake = Lake(self.lake)
        events = lake.read("events")
        ids = Counter(events.column("event_id").to_pylist())
        r = self.result
        r.acknowledged, r.in_lake = len(acked), len(ids)
        r.lost = len(acked - set(ids))
        r.duplicated = sum(n - 1 for n in ids.values() if n > 1)
        seqs: dict[str, set[int]] = {}
        for e, s in zip(
            events.column("episode_id").to_pylist(), events.column("seq").to_pylist(), strict=True
        ):
            seqs.setdefault(e, set()).add(s)
        r.gaps = sum(1 for s in seqs.values() if s != set(range(max(s) + 1)))
        clean = str(self.root / "replayed")
        replay(PipelineConfig(**{**cfg.__dict__, "lake_root": clean}))
        r.replay_equal = all(d.equal for d in diff_lakes(lake, Lake(clean)))


def _shippers() -> list[int]:
    return [
        int(d.name)
        for d in Path("/proc").iterdir()
        if d.name.isdigit() and "ingest.shipper" in _cmdline(int(d.name))
    ]


def table(results: list[SeedResult]) -> str:
    """The printed table: seed, faults by kind, events acknowledged and in the lake, lost, duplicated."""
    head = [
        "seed",
        *KINDS,
        "faults",
        "acknowledged",
        "in lake",
        "lost",
        "duplicated",
        "gaps",
        "replay =",
        "s",
    ]
    rows = [head]
    for r in results:
        rows.append([str(r.seed), *(str(r.faults[k]) for k in KINDS), str(sum(r.faults.values())),
                     str(r.acknowledged), str(r.in_lake), str(r.lost), str(r.duplicated), str(r.gaps),
                     "yes" if r.replay_equal else "NO", f"{r.seconds:.0f}"])  # fmt: skip
    total = Counter[str]()
    for r in results:
        total.update(r.faults)
    rows.append(["all", *(str(total[k]) for k in KINDS), str(sum(total.values())),
                 str(sum(r.acknowledged for r in results)), str(sum(r.in_lake for r in results)),
                 str(sum(r.lost for r in results)), str(sum(r.duplicated for r in results)),
                 str(sum(r.gaps for r in results)), "", ""])  # fmt: skip
    widths = [max(len(row[c]) for row in rows) for c in range(len(head))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description="the fault suite on a 3-broker loopback cluster")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--window", type=float, default=30.0, help="seconds of faults per seed")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import logging
    import tempfile

    # the table is the output: Beam's and kafka-python's chatter (reconnects are the point here) is not
    logging.basicConfig(level=logging.WARNING, force=True)
    for noisy in ("kafka", "apache_beam", "distributed"):
        logging.getLogger(noisy).setLevel(logging.ERROR)

    root = args.dir or Path(tempfile.mkdtemp(prefix="trajlake-chaos-"))
    cluster = KafkaCluster(root / "cluster", f"127.0.0.1:{_port()}", brokers=3)
    cluster.start()
    results = []
    print(table([]).splitlines()[0], flush=True)
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            r = Chaos(cluster, root / f"seed-{seed}", seed).run(window_s=args.window)
            results.append(r)
            print(table([r]).splitlines()[1], flush=True)
    finally:
        cluster.stop()
    print(table(results))
    if args.json:
        args.json.write_text(
            json.dumps([{**r.__dict__, "faults": dict(r.faults)} for r in results], indent=2)
        )
    sys.exit(0 if all(r.ok for r in results) else 1)


def _port() -> int:
    from ingest.kafka_broker import listen_port

    return listen_port()


def run_seeds(cluster: KafkaCluster, root: Path, seeds: list[int], **kw: Any) -> list[SeedResult]:
    """The seeds on one cluster (the test's entry point)."""
    return [Chaos(cluster, root / f"seed-{s}", s).run(**kw) for s in seeds]


if __name__ == "__main__":
    main()
