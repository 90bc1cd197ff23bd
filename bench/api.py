"""Query API latency: answers served from the snapshot cache vs reading Delta per request.

Run::

    .venv/bin/python bench/api.py [--episodes 5000] [--requests 200] [--commits 10] [--json OUT]

One run, one lake (built here, no broker: events are folded by the pipeline's
own projection and failure attribution, ``fold_episode`` -> ``episode_row`` /
``step_rows`` / ``reward_rows`` / ``failure_rows``, and committed with
``Lake.write`` in ``--commits`` micro-batches, plus one commit of re-judge
rewards at a second judge version), and two questions asked over and over:

- ``breakdown``: ``GET /failures/breakdown?by=family`` (failures of the latest
  judge version joined to ``episodes`` for the family, counted per group);
- ``episodes``: ``GET /episodes?family=<f>&status=failure&limit=50`` (filter,
  newest first, one page).

For each, three ways, alternating request by request:

(a) ``api``: the FastAPI app through ``TestClient`` (in-process HTTP: routing,
    validation, JSON), its snapshot cache warm; each request still checks every
    table's latest version.
(b) ``baseline``: no HTTP at all; per request, open the Delta tables with
    deltalake (``DeltaTable(uri).to_pyarrow_table()``) and compute the same
    answer with the same Arrow code.
(c) ``api, cache off``: the app with a zero-entry cache (every request reads
    the tables through ``Lake.read``), for reference.

The answers of (a) and (b) are compared before timing. The ratio printed is
the baseline's p50 over the API's p50.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this folder holds api.py: keep it from shadowing the `api` package

import pyarrow as pa  # noqa: E402
from deltalake import DeltaTable  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from api import create_app  # noqa: E402
from api.analysis import (  # noqa: E402
    breakdown,
    choose_judge,
    filter_rows,
    judge_versions,
    judged_by,
    newest_first,
)
from lake import Lake  # noqa: E402
from pipelines import episode_row, failure_rows, fold_episode, reward_rows, step_rows  # noqa: E402
from schemas import TABLES, current_version, new_id, parse_event  # noqa: E402

console = Console(width=120)
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
FAMILIES = ("pyfix", "wordplay", "sqlfix", "regex")
PRODUCER = {"worker_id": "bench", "host": "h", "sdk_version": "bench"}
ERRORS = [
    "AssertionError: assert {a} == {b}",
    "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    "KeyError: 'k{a}'",
    "ZeroDivisionError: division by zero",
    "FileNotFoundError: [Errno 2] No such file or directory: '/w/f{a}.py'",
]


def _doc(eid: str, seq: int, type_: str, payload: dict[str, Any], ts: dt.datetime) -> dict[str, Any]:
    return {
        "event_id": new_id(),
        "episode_id": eid,
        "seq": seq,
        "type": type_,
        "ts": ts.isoformat(),
        "schema_version": current_version(type_),
        "producer": PRODUCER,
        "payload": payload,
    }


def episode_docs(i: int, rng: random.Random) -> list[dict[str, Any]]:
    """One episode's events: a few model/tool steps, an online v1 reward, an end."""
    eid = new_id()
    start = T0 + dt.timedelta(seconds=37 * i)
    family = FAMILIES[i % len(FAMILIES)]
    docs = [
        _doc(
            eid,
            0,
            "episode_started",
            {
                "task": {"id": f"{family}-{rng.randrange(40)}", "family": family},
                "policy": {"id": "pol", "version": str(1 + i // 1000)},
                "group_id": f"g{i // 4}",
            },
            start,
        )
    ]
    passed = rng.random() < 0.45
    for s in range(rng.randint(1, 4)):
        seq = len(docs)
        docs.append(_doc(eid, seq, "model_call", {"completion": "step " + "x" * rng.randint(50, 400)}, start))
        last = not passed and rng.random() < 0.5
        err = rng.choice(ERRORS).format(a=rng.randrange(100), b=rng.randrange(100))
        docs.append(
            _doc(
                eid,
                seq + 1,
                "tool_call",
                {"call_id": f"c{s}", "tool": "bash", "arguments": {"cmd": "pytest"}},
                start,
            )
        )
        docs.append(
            _doc(
                eid,
                seq + 2,
                "tool_result",
                {
                    "call_id": f"c{s}",
                    "exit_code": 1 if last else 0,
                    "stdout": {"text": err if last else "ok", "size": 2},
                    "timed_out": rng.random() < 0.03,
                },
                start + dt.timedelta(seconds=seq + 2),
            )
        )
    verdict = "pass" if passed else ("error" if rng.random() < 0.03 else "fail")
    seq = len(docs)
    docs.append(
        _doc(
            eid,
            seq,
            "reward",
            {
                "judge_name": "tests",
                "judge_version": "v1",
                "score": float(passed),
                "verdict": verdict,
                "flags": ["reward_hack_suspected"] if rng.random() < 0.02 else [],
            },
            start + dt.timedelta(seconds=seq),
        )
    )
    status = "success" if passed else rng.choice(["failure", "failure", "failure", "truncated"])
    docs.append(_doc(eid, seq + 1, "episode_ended", {"status": status, "reason": "step limit"}, start))
    return docs


def rejudge_doc(eid: str, rng: random.Random) -> dict[str, Any]:
    verdict = rng.choice(["pass", "fail"])
    return _doc(
        eid,
        10_000,
        "reward",
        {
            "judge_name": "tests",
            "judge_version": "v2",
            "score": float(verdict == "pass"),
            "verdict": verdict,
            "source": "rejudge",
            "rejudge_run_id": "bench",
        },
        T0 + dt.timedelta(days=30),
    )


def build_lake(root: Path, n_episodes: int, commits: int) -> dict[str, int]:
    """Fold and commit the episodes in ``commits`` batches, then re-judge half of them at v2."""
    rng = random.Random(7)
    lake = Lake(root)
    lake.ensure()
    events: dict[str, list[Any]] = {}
    per_batch = max(1, n_episodes // commits)
    for start in range(0, n_episodes, per_batch):
        touched = []
        for i in range(start, min(n_episodes, start + per_batch)):
            docs = episode_docs(i, rng)
            events[docs[0]["episode_id"]] = [parse_event(d) for d in docs]
            touched.append(docs[0]["episode_id"])
        write_states(lake, [fold_episode(e, events[e]) for e in touched])
    rejudged = [e for e in events if rng.random() < 0.5]
    for e in rejudged:
        events[e].append(parse_event(rejudge_doc(e, rng)))
    write_states(lake, [fold_episode(e, events[e]) for e in rejudged])
    return lake.versions()


def write_states(lake: Lake, states: list[Any]) -> None:
    rows = {
        "episodes": [episode_row(s) for s in states],
        "steps": [r for s in states for r in step_rows(s)],
        "rewards": [r for s in states for r in reward_rows(s)],
        "failures": [r for s in states for r in failure_rows(s)],
    }
    for name, batch in rows.items():
        lake.write(name, pa.Table.from_pylist(batch, schema=TABLES[name]), mode="upsert")


# ------------------------------------------------------------------ the baseline: Delta per request


def baseline_app(root: Path) -> FastAPI:
    """The same two questions as routes that open the Delta tables and compute the answer per request."""
    app = FastAPI()

    def read(name: str) -> tuple[pa.Table, int]:
        table = DeltaTable(str(root / name))
        return table.to_pyarrow_table(), table.version()

    @app.get("/failures/breakdown")
    def failure_breakdown(by: str = "category") -> dict[str, Any]:
        (failures, vf), (rewards, vr), (episodes, ve) = read("failures"), read("rewards"), read("episodes")
        judge, version = choose_judge(judge_versions(rewards), None, None, failures=failures)
        rows = judged_by(failures, judge, version)
        total = rows.num_rows
        return {
            "versions": {"failures": vf, "rewards": vr, "episodes": ve},
            "judge": judge,
            "judge_version": version,
            "by": by,
            "total": total,
            "groups": [{"key": k, "count": n, "share": n / total} for k, n in breakdown(rows, by, episodes)],
        }

    @app.get("/episodes")
    def list_episodes(family: str, status: str, limit: int = 50, offset: int = 0) -> dict[str, Any]:
        episodes, ve = read("episodes")
        matching = filter_rows(newest_first(episodes), {"task_family": family, "status": status})
        return {
            "versions": {"episodes": ve},
            "total": matching.num_rows,
            "limit": limit,
            "offset": offset,
            "items": matching.slice(offset, limit).to_pylist(),
        }

    return app


def ask_breakdown(client: TestClient) -> dict[str, Any]:
    r = client.get("/failures/breakdown", params={"by": "family"})
    assert r.status_code == 200, r.text
    body = r.json()
    return {k: body[k] for k in ("versions", "judge", "judge_version", "total", "groups")}


def ask_episodes(client: TestClient, family: str = "wordplay") -> dict[str, Any]:
    r = client.get("/episodes", params={"family": family, "status": "failure", "limit": 50})
    assert r.status_code == 200, r.text
    body = r.json()
    return {"versions": body["versions"], "total": body["total"], "items": body["items"]}


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


CASES: dict[str, Callable[[TestClient], dict[str, Any]]] = {
    "breakdown (by family)": ask_breakdown,
    "episodes (filter, page of 50)": ask_episodes,
}
API, BASELINE, NOCACHE = "api (cache)", "baseline (Delta per request)", "api, cache off"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="query API latency: snapshot cache vs Delta read per request")
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="trajlake-bench-api-"))
    try:
        root = tmp / "lake"
        console.print(f"building a lake of {args.episodes:,} episodes in {args.commits} commits ...")
        t0 = time.perf_counter()
        versions = build_lake(root, args.episodes, args.commits)
        lake = Lake(root)
        counts = {n: lake.row_count(n) for n in ("episodes", "steps", "rewards", "failures")}
        console.print(
            f"  {time.perf_counter() - t0:.1f}s; versions {versions}; rows "
            + ", ".join(f"{n} {c:,}" for n, c in counts.items())
        )
        with ExitStack() as stack:
            app = create_app(root)
            clients = {
                API: stack.enter_context(TestClient(app)),
                BASELINE: stack.enter_context(TestClient(baseline_app(root))),
                NOCACHE: stack.enter_context(TestClient(create_app(root, cache_entries=0))),
            }
            for case, ask in CASES.items():  # the same answers, before any timing
                answers = [ask(c) for c in clients.values()]
                if not answers[0] == answers[1] == answers[2]:
                    console.print(f"[red]{case}: the answers differ[/red]")
                    return 1
            results: dict[str, dict[str, dict[str, float]]] = {}
            for case, ask in CASES.items():
                console.print(f"timing {case}: {args.requests} requests each way, alternating ...")
                lat: dict[str, list[float]] = {w: [] for w in clients}
                for _ in range(args.requests):
                    for way, client in clients.items():
                        lat[way].append(timed(lambda: ask(client)))  # noqa: B023 - called right here
                results[case] = {
                    w: {"p50_ms": 1e3 * statistics.median(xs), "p99_ms": 1e3 * pct(xs, 0.99)}
                    for w, xs in lat.items()
                }
            reader = app.state.reader
            reads = reader.stats.reads
            reader.clear()
            cold = timed(lambda: ask_breakdown(clients[API]))
        table = Table(
            title=f"query API latency: {args.episodes:,} episodes, {counts['failures']:,} failure rows"
        )
        for col in ("question", "way", "p50 ms", "p99 ms", "baseline p50 / this p50"):
            table.add_column(col)
        for case, ways in results.items():
            base = ways[BASELINE]["p50_ms"]
            for way, r in ways.items():
                table.add_row(
                    case, way, f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", f"{base / r['p50_ms']:.1f}x"
                )
        console.print(table)
        for case, ways in results.items():
            ratio = ways[BASELINE]["p50_ms"] / ways[API]["p50_ms"]
            console.print(f"{case}: baseline p50 / api p50 = [bold]{ratio:.1f}x[/bold]")
        console.print(
            f"the cached api read Delta data {reads} times in {2 * args.requests + 2} requests; "
            f"its first breakdown after the cache was emptied took {1e3 * cold:.1f} ms"
        )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {"episodes": args.episodes, "rows": counts, "results": results, "cold_ms": 1e3 * cold},
                    indent=2,
                )
            )
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
