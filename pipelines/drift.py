"""Drift check: do recorded episodes still reproduce in today's environment?

For each selected episode, a fresh sandbox is put in the task's initial state
(the image and files the task names now) and the episode's recorded tool calls
are executed again, in ``seq`` order; each output is compared with the
recorded one after normalising what may differ between two runs of the same
environment (times, durations, pids, temporary paths, addresses, and the
patterns the task declares as ``nondeterministic``). The first call whose exit
code, timeout, error kind, stdout or stderr differs is the episode's first
diverging step; the check stops there (what follows depends on it). When it
diverges, what changed since the episode ran is named as the likely cause: the
sandbox image's digest, the task's version, its spec or its initial state
against the digests admission recorded.

Results become rows of the ``drift`` table through the log (a ``drift:`` control
stream per episode and run, :mod:`schemas.control`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ingest.blobs import BlobStore
from judges.final_state import WORKSPACE_LIMIT, read_archive
from judges.tasks import Task
from lake import Lake, sql_literal
from pipelines.episode_filter import complete_episodes
from pipelines.errors import PipelineError
from sandboxes.errors import SandboxError
from sandboxes.interface import Sandbox
from sandboxes.pool import SandboxPool
from sandboxes.tools import ToolAction, ToolOutcome, run_tool
from schemas.errors import TrajlakeError

DEFAULT_NONDETERMINISM: dict[str, str] = {
    "timestamps": r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    # a clock time, not a file's line:column (never right after ':', a word or a path)
    r"|(?<![\w:./-])\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?![\w:])"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b"
    r"|\b(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?\s+\d{1,2}(?:,?\s+\d{4})?\b",
    "epoch_times": r"\b1[6-9]\d{8}(?:\.\d+)?\b",  # `date +%s` and friends: seconds since 1970, 2020s-2030s
    "uuids": r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    "durations": r"\b\d+(?:\.\d+)?\s?(?:s|ms|us|µs|ns|sec|secs|seconds)\b",
    "pids": r"(?i)\bpid[ =:]*\d+",
    "temp_paths": r"/tmp/[^\s'\":]+",
    "addresses": r"\b0x[0-9a-fA-F]{6,}\b",
    # a framed summary line (pytest's "==== 3 passed in 0.05s ====") pads to the width of its text
    "rulers": r"([=\-_*#~])\1{3,}",
}
"""What any tool output may change between two runs of one environment, by kind (replaced by ``<kind>``)."""
OUTPUT_LIMIT = 4000
"""Characters of each diverging output kept in a report (head and tail)."""
STATUSES = ("success", "failure", "truncated")


class DriftError(PipelineError):
    """The drift check cannot run (no episodes table, a bad selection)."""


@dataclass(frozen=True)
class DriftSelection:
    """Which recorded episodes a drift check re-executes."""

    families: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()
    episode_ids: tuple[str, ...] = ()
    since: dt.datetime | None = None
    """Only episodes started at or after this time."""
    statuses: tuple[str, ...] = STATUSES
    limit: int | None = None
    """At most this many episodes, newest first."""


@dataclass(frozen=True)
class RecordedCall:
    """One tool call of an episode and the result it recorded."""

    seq: int
    tool: str
    arguments: dict[str, Any]
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    error_kind: str | None
    duration_s: float = 0.0

    def timeout(self, cap: float) -> float:
        """How long to let it run again.

        A call killed at its timeout gets the time it had (it is killed again, or finishes if the
        environment got faster: a change); any other call, up to ``cap``.
        """
        return max(1.0, self.duration_s) if self.timed_out else cap

    def outcome(self) -> dict[str, Any]:
        """What a report shows of it."""
        return _shown(self.exit_code, self.timed_out, self.error_kind, self.stdout, self.stderr)


@dataclass
class DriftResult:
    """What re-executing one episode showed."""

    episode_id: str
    task_id: str | None
    task_version: str | None
    family: str | None
    reproducible: bool | None = None
    """``None``: it could not be checked (``error`` says why)."""
    first_diverging_seq: int | None = None
    steps_checked: int = 0
    recorded: dict[str, Any] | None = None
    """The diverging call and its recorded outcome."""
    replayed: dict[str, Any] | None = None
    """Its outcome now."""
    likely_causes: list[str] = field(default_factory=list)
    image_recorded: str | None = None
    image_now: str | None = None
    error: str | None = None

    def row(self, run_id: str, checked_at: dt.datetime) -> dict[str, Any]:
        """The result's row of the ``drift`` table."""
        return {
            "episode_id": self.episode_id,
            "run_id": run_id,
            "checked_at": checked_at,
            "task_id": self.task_id,
            "task_version": self.task_version,
            "task_family": self.family,
            "reproducible": self.reproducible,
            "first_diverging_seq": self.first_diverging_seq,
            "steps_checked": self.steps_checked,
            "recorded": json.dumps(self.recorded) if self.recorded is not None else None,
            "replayed": json.dumps(self.replayed) if self.replayed is not None else None,
            "likely_causes": list(self.likely_causes),
            "image_recorded": self.image_recorded,
            "image_now": self.image_now,
            "error": self.error,
        }


def new_run_id() -> str:
    """A drift run's id (its rows' key beside the episode id)."""
    return f"drift-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def normaliser(task: Task | None) -> Callable[[str], str]:
    """Text -> text with the defaults' and the task's nondeterministic parts replaced by placeholders."""
    compiled = [(re.compile(p), f"<{k}>") for k, p in DEFAULT_NONDETERMINISM.items() if k != "rulers"]
    declared = [(re.compile(p), "<declared>") for p in (task.spec.nondeterministic or [])] if task else []
    ruler = re.compile(DEFAULT_NONDETERMINISM["rulers"])

    def norm(text: str) -> str:
        for rx, placeholder in (*declared, *compiled):
            text = rx.sub(placeholder, text)
        return ruler.sub(r"\1\1\1", text)

    return norm


def select(lake: Lake, selection: DriftSelection) -> list[dict[str, Any]]:
    """The complete episodes matching ``selection``, newest first.

    Raises:
        DriftError: the lake has no episodes yet.
    """
    if not lake.exists("episodes") or not lake.exists("steps"):
        raise DriftError(f"the lake at {lake.root} has no episodes yet (fold the log first)")
    where = complete_episodes(families=selection.families, task_ids=selection.task_ids,
                              episode_ids=selection.episode_ids, statuses=selection.statuses)  # fmt: skip
    eps = lake.read("episodes", where=where).to_pylist()
    if selection.since is not None:
        eps = [e for e in eps if e["started_at"] is not None and e["started_at"] >= selection.since]
    eps.sort(key=lambda r: (r["started_at"] or dt.datetime.min.replace(tzinfo=dt.UTC), r["episode_id"]),
             reverse=True)  # fmt: skip
    return eps[: selection.limit] if selection.limit is not None else eps


def recorded_calls(
    lake: Lake, episode_id: str, blobs: BlobStore | None
) -> tuple[list[RecordedCall], str | None]:
    """The episode's tool calls with their recorded results, and the image digest its sandbox ran.

    In ``seq`` order; outputs in full (from the blob store when they were larger than inline).

    Raises:
        DriftError: a call has no result, or a large output's blob is not in the store.
    """
    rows = lake.read("steps", where=f"episode_id = {sql_literal(episode_id)}",
                     columns=["seq", "type", "payload"]).to_pylist()  # fmt: skip
    rows.sort(key=lambda r: r["seq"])
    calls: dict[str, tuple[int, dict[str, Any]]] = {}
    results: dict[str, dict[str, Any]] = {}
    image = None
    for r in rows:
        p = json.loads(r["payload"])
        if r["type"] == "tool_call":
            calls[p["call_id"]] = (r["seq"], p)
        elif r["type"] == "tool_result":
            results[p["call_id"]] = p
        elif r["type"] == "sandbox" and image is None and p.get("image"):
            image = p["image"]
    out = []
    for call_id, (seq, call) in sorted(calls.items(), key=lambda kv: kv[1][0]):
        res = results.get(call_id)
        if res is None:
            raise DriftError(f"tool call {call_id} (step {seq}) has no recorded result")
        out.append(RecordedCall(seq=seq, tool=call["tool"], arguments=dict(call.get("arguments") or {}),
                                exit_code=res.get("exit_code"), stdout=_text(res.get("stdout"), blobs),
                                stderr=_text(res.get("stderr"), blobs), timed_out=bool(res.get("timed_out")),
                                error_kind=res.get("error_kind"),
                                duration_s=float(res.get("duration_s") or 0.0)))  # fmt: skip
    return out, image


def _text(output: Any, blobs: BlobStore | None) -> str:
    if not isinstance(output, dict):
        return ""
    blob = output.get("blob")
    if not blob:
        return str(output.get("text") or "")
    if blobs is None:
        raise DriftError("a recorded output is in the blob store, and none is configured")
    try:
        return blobs.get(blob["sha256"]).decode("utf-8", "replace")
    except (OSError, TrajlakeError, KeyError) as exc:
        raise DriftError(
            f"the full output {blob.get('sha256', '?')[:12]} is not in the blob store: {exc}"
        ) from exc


def _cut(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    half = OUTPUT_LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - OUTPUT_LIMIT} characters ...]\n{text[-half:]}"


def _shown(
    exit_code: int | None, timed_out: bool, error_kind: str | None, stdout: str, stderr: str
) -> dict[str, Any]:
    return {"exit_code": exit_code, "timed_out": timed_out, "error_kind": error_kind,
            "stdout": _cut(stdout), "stderr": _cut(stderr)}  # fmt: skip


_DERIVED_KINDS = ("nonzero_exit", "timeout")
"""Error kinds the recorder derives from the exit code and the timeout (compared there)."""


def _kind(kind: str | None) -> str | None:
    return None if kind in _DERIVED_KINDS else kind


def same(recorded: RecordedCall, now: ToolOutcome, norm: Callable[[str], str]) -> bool:
    """Whether the outcome now is the recorded one, up to what may differ between runs."""
    was = (recorded.exit_code, recorded.timed_out, _kind(recorded.error_kind))
    if was != (now.exit_code, now.timed_out, _kind(now.error_kind)):
        return False
    if recorded.timed_out:
        return True  # killed at its timeout both times: how far it got is a matter of time
    return norm(recorded.stdout) == norm(now.stdout) and norm(recorded.stderr) == norm(now.stderr)


def replay_calls(
    sandbox: Sandbox, calls: Sequence[RecordedCall], norm: Callable[[str], str], *, timeout_s: float
) -> tuple[RecordedCall | None, ToolOutcome | None, int]:
    """Execute ``calls`` again in order in a prepared sandbox, until one's outcome is not its recorded one.

    Returns:
        The first diverging call and its outcome now (``None, None`` when all agree), and the calls run.
    """
    n = 0
    for call in calls:
        if call.tool == "submit":
            continue
        now = run_tool(sandbox, ToolAction(call.tool, call.arguments), timeout=call.timeout(timeout_s))
        n += 1
        if not same(call, now, norm):
            return call, now, n
    return None, None, n


def reexecute(
    lake: Lake,
    episode_id: str,
    task: Task,
    sandbox: Sandbox,
    blobs: BlobStore | None,
    *,
    timeout_s: float = 120.0,
) -> tuple[int | None, int]:
    """Rebuild the state an episode left: its recorded calls again, in a sandbox prepared for ``task``.

    Returns:
        The step where an output diverged (``None``: the state is the episode's), and the calls run.

    Raises:
        DriftError: a call has no recorded result, or a large output is not in the blob store.
    """
    calls, _ = recorded_calls(lake, episode_id, blobs)
    call, _, n = replay_calls(sandbox, calls, normaliser(task), timeout_s=timeout_s)
    return (call.seq if call is not None else None), n


def check_episode(
    episode: Mapping[str, Any],
    task: Task,
    pool: SandboxPool,
    calls: Sequence[RecordedCall],
    image_recorded: str | None,
    admitted: Mapping[str, Any] | None,
    *,
    timeout_s: float,
) -> DriftResult:
    """Re-execute one episode's calls from the task's initial state and compare (see the module)."""
    res = DriftResult(episode_id=episode["episode_id"], task_id=episode["task_id"],
                      task_version=episode["task_version"], family=episode["task_family"],
                      image_recorded=image_recorded)  # fmt: skip
    norm = normaliser(task)
    with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        task.prepare(sb)
        res.image_now = sb.image_digest
        state_now = None
        if admitted is not None and admitted.get("state_digest"):
            state_now = read_archive(sb.export_workspace(max_bytes=WORKSPACE_LIMIT)).digest
        call, now, res.steps_checked = replay_calls(sb, calls, norm, timeout_s=timeout_s)
        res.reproducible = call is None
        if call is not None and now is not None:
            res.first_diverging_seq = call.seq
            res.recorded = {"tool": call.tool, "arguments": _args(call.arguments), **call.outcome()}
            res.replayed = _shown(now.exit_code, now.timed_out, now.error_kind, now.stdout, now.stderr)
    res.likely_causes = _causes(res, task, admitted, state_now)
    return res


def _args(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _cut(v) if isinstance(v, str) else v for k, v in arguments.items()}


def _causes(
    res: DriftResult, task: Task, admitted: Mapping[str, Any] | None, state_now: str | None
) -> list[str]:
    """What changed since the episode ran.

    Named whether or not it diverged: a change that did not show in this episode's outputs is
    still a change.
    """
    out = []
    if res.image_recorded and res.image_now and res.image_recorded != res.image_now:
        out.append(f"the sandbox image changed: the episode ran {res.image_recorded[:19]}, "
                   f"{task.spec.initial_state.image} is {res.image_now[:19]} now")  # fmt: skip
    if res.task_version is not None and res.task_version != task.spec.version:
        out.append(f"the task changed version: the episode ran {res.task_id}@{res.task_version}, "
                   f"the task file says {task.spec.version}")  # fmt: skip
    if admitted is not None:
        if admitted.get("spec_digest") and admitted["spec_digest"] != task.spec_digest:
            out.append(f"the task's spec changed since {res.task_id}@{res.task_version} was admitted")
        if state_now is not None and admitted.get("state_digest") != state_now:
            out.append(f"the task's initial state (its files or setup) changed since {res.task_id}@"
                       f"{res.task_version} was admitted")  # fmt: skip
    if res.reproducible is False and not out:
        out.append("neither the image nor the task changed: the tool's output varies between runs (declare "
                   "it in the task's `nondeterministic` patterns) or something outside them did")  # fmt: skip
    return out


def admitted_rows(lake: Lake) -> dict[tuple[str, str], dict[str, Any]]:
    """The ``tasks`` rows by (task id, version) (empty when nothing was admitted)."""
    if not lake.exists("tasks"):
        return {}
    rows = lake.read("tasks", columns=["task_id", "version", "spec_digest", "state_digest"]).to_pylist()
    return {(r["task_id"], r["version"]): r for r in rows}


def run_drift(
    lake: Lake,
    tasks: Mapping[str, Task],
    pool: SandboxPool,
    blobs: BlobStore | None,
    *,
    selection: DriftSelection | None = None,
    workers: int = 2,
    timeout_s: float = 120.0,
    on_selected: Callable[[int], None] | None = None,
    on_result: Callable[[DriftResult], None] | None = None,
) -> list[DriftResult]:
    """Check every selected episode; results in the selection's order (newest first).

    An episode that cannot be checked (its task is not among ``tasks``, a call has no
    result, the sandbox broke) is a result with ``reproducible=None`` and the reason.
    """
    episodes = select(lake, selection or DriftSelection())
    if on_selected:
        on_selected(len(episodes))
    admitted = admitted_rows(lake)
    lock = threading.Lock()

    def one(ep: dict[str, Any]) -> DriftResult:
        task = tasks.get(ep["task_id"])
        try:
            if task is None:
                raise DriftError(f"task {ep['task_id']} is not under the task directories given (--tasks)")
            calls, image = recorded_calls(lake, ep["episode_id"], blobs)
            row = admitted.get((ep["task_id"], ep["task_version"]))
            res = check_episode(ep, task, pool, calls, image, row, timeout_s=timeout_s)
        except (DriftError, SandboxError, TrajlakeError, OSError) as exc:
            res = DriftResult(episode_id=ep["episode_id"], task_id=ep["task_id"],
                              task_version=ep["task_version"], family=ep["task_family"],
                              error=f"{type(exc).__name__}: {exc}"[:2000])  # fmt: skip
        if on_result:
            with lock:
                on_result(res)
        return res

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        return list(ex.map(one, episodes))
