"""Re-judge jobs: score recorded episodes again with another judge; the scores become events.

An episode's judgement is only as good as the judge that made it. When a judge
changes (a fixed bug, a new reward-hacking check, a stricter test suite) its
version changes, and the episodes scored by the old version can be scored again:

1. select episodes from the lake at pinned table versions (family, task, status);
2. rebuild each one's final state from the archive its rollout left in the blob
   store (``episode_ended.final_state_ref``) in a fresh sandbox, and its events
   from the ``events`` table;
3. run the new judge on (events, final state);
4. send the judgement to ``trajlake.judgements`` as a ``reward`` event with
   ``source="rejudge"`` and the run id; the pipeline folds it into ``rewards``
   and ``failures`` beside the old version's rows, never over them.

A run is safe to repeat: a reward's ``event_id`` is derived from the run id and
the episode, so a run restarted after a crash re-sends the same ids and the
pipeline's dedup keeps one; episodes the lake already shows scored by the target
judge version are skipped unless forced.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fold.rows import row_to_event
from ingest.blobs import BlobStore
from ingest.errors import IngestError
from ingest.sink import EventSink, Receipt
from judges.context import JudgeContext
from judges.metrics import judge_measured
from judges.registry import Judge, build_judge
from judges.tasks import Task
from lake.store import Lake, sql_literal
from pipelines.drift import DriftError, reexecute
from pipelines.episode_filter import complete_episodes
from pipelines.errors import PipelineError
from sandboxes.errors import SandboxError
from sandboxes.pool import SandboxPool
from sandboxes.workspace_io import extract_archive
from schemas import fixes
from schemas.codec import serialize_event
from schemas.errors import InfraError, TrajlakeError
from schemas.events import EventBase, Producer, Reward
from schemas.ids import derived_id

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_RUN_ID = re.compile(r"^rj-(\d{8}T\d{6})-([0-9a-f]{6})$")
_PRODUCER_HOST = socket.gethostname()


class RejudgeError(PipelineError):
    """A re-judge run could not start or could not deliver its judgements."""


def new_run_id(now: dt.datetime | None = None) -> str:
    """A fresh run id, ``rj-<UTC time>-<6 hex>``; the time seeds the run's event ids."""
    now = now or dt.datetime.now(dt.UTC)
    return f"rj-{now.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


def run_epoch_ms(run_id: str) -> int:
    """The start time encoded in a run id, in Unix milliseconds.

    Raises:
        RejudgeError: not a run id made by :func:`new_run_id`.
    """
    m = _RUN_ID.match(run_id)
    if not m:
        raise RejudgeError(f"run ids look like rj-20261130T120000-0a1b2c, not {run_id!r}")
    start = dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=dt.UTC)
    return int(start.timestamp() * 1000)


@dataclass(frozen=True)
class RejudgeSelection:
    """Which recorded episodes a run scores."""

    families: tuple[str, ...] = ()
    """Only episodes of these task families (all when empty)."""
    task_ids: tuple[str, ...] = ()
    """Only episodes of these tasks (all when empty)."""
    episode_ids: tuple[str, ...] = ()
    """Only these episodes (all when empty)."""
    statuses: tuple[str, ...] = ("success", "failure", "truncated")
    """Episode statuses to score; ``infra_error`` and ``aborted`` episodes have nothing to judge."""
    limit: int | None = None
    """At most this many episodes, oldest first."""
    versions: Mapping[str, int] | None = None
    """Delta versions of ``episodes``/``events``/``rewards`` to read (default: the latest)."""


@dataclass(frozen=True)
class Candidate:
    """One episode the selection found."""

    episode_id: str
    task_id: str
    task_version: str | None
    status: str
    final_state_ref: str | None
    previous: tuple[tuple[str, str, str, str], ...] = ()
    """(judge name, judge version, verdict, source) the lake already holds, oldest first."""

    def scored_by(self, name: str, version: str) -> bool:
        """Whether the lake already holds a judgement of this judge version."""
        return any((n, v) == (name, version) for n, v, _, _ in self.previous)

    def previous_verdict(self, name: str, version: str) -> str | None:
        """The verdict to compare a new judgement with.

        The latest judgement by another version of the same judge; failing that,
        the latest online judgement (the one the rollout made).
        """
        same = [verdict for n, v, verdict, _ in self.previous if n == name and v != version]
        if same:
            return same[-1]
        online = [verdict for _, _, verdict, source in self.previous if source == "online"]
        return online[-1] if online else None


@dataclass(frozen=True)
class RejudgeItem:
    """What the run did with one episode."""

    episode_id: str
    task_id: str
    outcome: Literal["judged", "skipped", "error"]
    reason: str | None = None
    judge_version: str | None = None
    verdict: str | None = None
    score: float | None = None
    previous_verdict: str | None = None
    """The verdict it is compared with (see :meth:`Candidate.previous_verdict`)."""
    event_id: str | None = None


@dataclass
class RejudgeReport:
    """A finished run."""

    run_id: str
    table_versions: dict[str, int]
    items: list[RejudgeItem]
    seconds: float

    def count(self, outcome: str) -> int:
        """Items with this outcome."""
        return sum(1 for i in self.items if i.outcome == outcome)

    def flips(self) -> Counter[tuple[str, str]]:
        """(previous verdict, new verdict) counts over judged episodes that had a previous one."""
        return Counter(
            (i.previous_verdict, i.verdict)
            for i in self.items
            if i.outcome == "judged" and i.previous_verdict and i.verdict
        )

    def skip_reasons(self) -> Counter[str]:
        """Why episodes were skipped, with counts (reasons without episode-specific detail)."""
        return Counter((i.reason or "").split(":")[0] for i in self.items if i.outcome == "skipped")


def _pinned(lake: Lake, versions: Mapping[str, int] | None) -> dict[str, int]:
    current = lake.versions()
    missing = [t for t in ("episodes", "events") if t not in current]
    if missing:
        raise RejudgeError(
            f"the lake at {lake.root} has no {' or '.join(missing)} table yet (fold the log first)"
        )
    out: dict[str, int] = {t: current[t] for t in ("episodes", "events", "rewards") if t in current}
    for name, v in (versions or {}).items():
        if name not in out:
            raise RejudgeError(f"cannot pin {name}: the re-judge job reads episodes, events and rewards")
        if v > out[name]:
            raise RejudgeError(f"{name} has no version {v}; its latest is {out[name]}")
        out[name] = v
    return out


def select(lake: Lake, selection: RejudgeSelection) -> tuple[list[Candidate], dict[str, int]]:
    """The complete episodes matching ``selection`` at pinned versions, oldest first.

    Args:
        lake: the lake to read.
        selection: filters and versions.

    Returns:
        The candidates and the table versions they were read at.
    """
    versions = _pinned(lake, selection.versions)
    where = complete_episodes(families=selection.families, task_ids=selection.task_ids,
                              episode_ids=selection.episode_ids, statuses=selection.statuses)  # fmt: skip
    eps = lake.read("episodes", version=versions["episodes"], where=where).to_pylist()
    eps.sort(key=lambda r: (r["started_at"] or dt.datetime.min.replace(tzinfo=dt.UTC), r["episode_id"]))
    if selection.limit is not None:
        eps = eps[: selection.limit]
    ids = [r["episode_id"] for r in eps]
    refs: dict[str, str | None] = {}
    for chunk in _chunks(ids, 500):
        ended = lake.read(
            "events",
            version=versions["events"],
            where=f"type = 'episode_ended' AND episode_id IN ({_in(chunk)})",
        )
        for row in ended.select(["episode_id", "payload"]).to_pylist():
            refs[row["episode_id"]] = json.loads(row["payload"]).get("final_state_ref")
    previous: dict[str, list[tuple[Any, str, str, str, str]]] = {}
    if "rewards" in versions:
        for chunk in _chunks(ids, 500):
            rows = lake.read(
                "rewards", version=versions["rewards"], where=f"episode_id IN ({_in(chunk)})"
            ).to_pylist()
            for r in rows:
                previous.setdefault(r["episode_id"], []).append(
                    (r["ts"], r["judge_name"], r["judge_version"], r["verdict"], r["source"])
                )
    out = []
    for r in eps:
        prev = sorted(previous.get(r["episode_id"], []), key=lambda p: (p[0], p[1], p[2]))
        out.append(
            Candidate(
                episode_id=r["episode_id"],
                task_id=r["task_id"],
                task_version=r["task_version"],
                status=r["status"],
                final_state_ref=refs.get(r["episode_id"]),
                previous=tuple((name, ver, verdict, src) for _, name, ver, verdict, src in prev),
            )
        )
    return out, versions


def _in(values: Sequence[str]) -> str:
    return ", ".join(sql_literal(v) for v in values)


def _chunks(items: Sequence[str], n: int) -> list[Sequence[str]]:
    return [items[i : i + n] for i in range(0, len(items), n)]


def _judge_for(task: Task, judge_spec: Mapping[str, Any] | None) -> Judge:
    return build_judge(dict(judge_spec) if judge_spec is not None else task.spec.judge)


def rejudge(
    lake: Lake,
    tasks: Mapping[str, Task],
    pool: SandboxPool,
    sink: EventSink,
    blobs: BlobStore,
    *,
    topic: str,
    run_id: str | None = None,
    judge_spec: Mapping[str, Any] | None = None,
    selection: RejudgeSelection | None = None,
    force: bool = False,
    allow_task_drift: bool = False,
    workers: int = 2,
    on_item: Callable[[RejudgeItem], None] | None = None,
    on_selected: Callable[[int], None] | None = None,
) -> RejudgeReport:
    """Score the selected episodes with a judge and send the judgements to ``topic``.

    Args:
        lake: where the episodes were folded.
        tasks: the tasks by id (their initial state, hidden tests and judge spec).
        pool: sandboxes to rebuild final states in (its ``max_size`` bounds concurrency).
        sink: where the judgements go (acknowledged before this returns).
        blobs: the blob store the rollouts archived final states to.
        topic: the judgements topic.
        run_id: resume this run (same event ids); default a new one.
        judge_spec: ``{"name": ..., "config": {...}}`` applied to every episode;
            default each task's current judge.
        selection: which episodes.
        force: score episodes the lake already shows scored by the target version.
        allow_task_drift: score episodes that ran another version of their task.
        workers: episodes judged at once.
        on_item: called with every item as it finishes.
        on_selected: called once with the number of candidates.

    Returns:
        What was judged, skipped and failed.

    Raises:
        RejudgeError: nothing to read, a bad run id, or judgements not acknowledged.
    """
    start = time.monotonic()
    run_id = run_id or new_run_id()
    epoch_ms = run_epoch_ms(run_id)
    selection = selection or RejudgeSelection()
    if judge_spec is not None:
        build_judge(dict(judge_spec))  # a bad spec fails here, before any sandbox starts
    candidates, versions = select(lake, selection)
    if on_selected:
        on_selected(len(candidates))
    producer = Producer.here(f"rejudge-{run_id}")
    receipts: list[tuple[RejudgeItem, Receipt]] = []
    lock = threading.Lock()

    def one(c: Candidate) -> RejudgeItem:
        try:
            item = _judge_one(
                c, lake, tasks, pool, blobs, versions, judge_spec, force, allow_task_drift, run_id,
                epoch_ms, producer,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - one episode's trouble (a corrupt archive, a full /tmp, a
            # judge config error) is that episode's error item: the run goes on, and its id stays resumable
            item = RejudgeItem(c.episode_id, c.task_id, "error", f"{type(exc).__name__}: {exc}"[:2000])
        if isinstance(item, tuple):
            item, event = item
            try:
                receipt = sink.send(topic, c.episode_id.encode(), serialize_event(event))
            except TrajlakeError as exc:
                item = RejudgeItem(c.episode_id, c.task_id, "error", f"not sent: {exc}", item.judge_version)
            else:
                with lock:
                    receipts.append((item, receipt))
        if on_item:
            on_item(item)
        return item

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="rejudge") as ex:
        items = list(ex.map(one, candidates))
    sink.flush(timeout=120)
    failed = [(i, r) for i, r in receipts if not r.is_done or r.exception is not None]
    if failed:
        first = failed[0][1].exception
        raise RejudgeError(
            f"{len(failed)} of {len(receipts)} judgements of run {run_id} were not acknowledged ({first}); "
            f"run it again with --run-id {run_id}: the same event ids are sent and deduplicated"
        )
    return RejudgeReport(
        run_id=run_id, table_versions=versions, items=items, seconds=time.monotonic() - start
    )


def _judge_one(
    c: Candidate,
    lake: Lake,
    tasks: Mapping[str, Task],
    pool: SandboxPool,
    blobs: BlobStore,
    versions: Mapping[str, int],
    judge_spec: Mapping[str, Any] | None,
    force: bool,
    allow_task_drift: bool,
    run_id: str,
    epoch_ms: int,
    producer: Producer,
) -> RejudgeItem | tuple[RejudgeItem, EventBase]:
    def skip(reason: str, version: str | None = None) -> RejudgeItem:
        return RejudgeItem(c.episode_id, c.task_id, "skipped", reason, version)

    task = tasks.get(c.task_id)
    if task is None:
        return skip(f"task not found: {c.task_id} is not under the given task directories")
    if c.task_version != task.spec.version and not allow_task_drift:
        return skip(f"task version drift: episode ran {c.task_version}, the task is now {task.spec.version}")
    judge = _judge_for(task, judge_spec)
    if c.final_state_ref is not None and not _SHA256.match(c.final_state_ref):
        return RejudgeItem(
            c.episode_id, c.task_id, "error", f"bad final state ref {c.final_state_ref[:80]!r}", judge.version
        )
    if c.scored_by(judge.name, judge.version) and not force:
        return skip(f"already scored: {judge.name} {judge.version}", judge.version)
    previous_verdict = c.previous_verdict(judge.name, judge.version)
    events: list[Any] = [
        row_to_event(r)
        for r in lake.read_episodes_events([c.episode_id], version=versions["events"]).to_pylist()
    ]
    events.sort(key=lambda e: e.seq)
    note = None
    try:
        if c.final_state_ref is None:
            # no archive: the final state is rebuilt by executing the recorded tool calls again from the
            # task's initial state (the drift check's re-execution), and judged only if every output
            # is the recorded one
            with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
                task.prepare(sb)
                diverged, n = reexecute(lake, c.episode_id, task, sb, blobs)
                if diverged is not None:
                    return RejudgeItem(c.episode_id, c.task_id, "error", "no final state archived, and "
                                       f"executing its tool calls again diverged at step {diverged}: the "
                                       f"state it left cannot be rebuilt; {fixes.DRIFT.render()}",
                                       judge.version)  # fmt: skip
                judgement = judge_measured(judge, JudgeContext(task=task, sandbox=sb, events=events))
                note = f"final state rebuilt by executing its {n} tool calls again"
        else:
            try:
                archive = blobs.get(c.final_state_ref)
            except IngestError as exc:
                return RejudgeItem(c.episode_id, c.task_id, "error", f"final state unreadable: {exc}",
                                   judge.version)  # fmt: skip
            with tempfile.TemporaryDirectory(prefix="trajlake-rejudge-") as tmp:
                ws = Path(tmp) / "ws"
                extract_archive(archive, ws)
                with pool.lease(image=task.spec.initial_state.image, workspace=ws) as sb:
                    judgement = judge_measured(judge, JudgeContext(task=task, sandbox=sb, events=events))
    except DriftError as exc:
        return RejudgeItem(c.episode_id, c.task_id, "error", f"no final state archived: {exc}", judge.version)
    except (SandboxError, InfraError) as exc:
        return RejudgeItem(
            c.episode_id, c.task_id, "error", f"sandbox: {type(exc).__name__}: {exc}", judge.version
        )
    payload = judgement.to_payload(source="rejudge", rejudge_run_id=run_id)
    if note is not None:  # said in the judgement itself: its state was rebuilt, not archived
        kept = payload.evidence if isinstance(payload.evidence, dict) else {"judge": payload.evidence}
        payload = payload.model_copy(update={"evidence": {**kept, "final_state": note}})
    event_id = derived_id(epoch_ms, f"{run_id}/{c.episode_id}/{judge.name}/{judge.version}")
    event = Reward(
        event_id=event_id,
        episode_id=c.episode_id,
        seq=0,  # not one of the episode's own steps: the projection orders re-judgements by time
        # the run's start, not now: a resumed run re-sends byte-identical events, so they land in
        # the same event_date partition and the pipeline's dedup (event_id, event_date) keeps one;
        # a later run still supersedes an earlier one (the projection orders by ts)
        ts=dt.datetime.fromtimestamp(epoch_ms / 1000, dt.UTC),
        producer=producer,
        payload=payload,
    )
    item = RejudgeItem(
        c.episode_id,
        c.task_id,
        "judged",
        note,
        judge.version,
        judgement.verdict,
        judgement.score,
        previous_verdict,
        event_id,
    )
    return item, event
