"""Failure analysis over Arrow snapshots: filters, group-bys, clusters, verdict diffs, lineage.

Pure functions of ``pyarrow`` tables in the lake's schemas
(:mod:`schemas.tables`); no I/O, no HTTP. Filters and group-bys run in Arrow
compute kernels; Python only touches the (small) grouped results and the page
of rows a response returns.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from api.errors import InvalidRequestError, NotFoundError
from schemas.tables import TABLES

BreakdownKey = Literal["category", "task", "family", "policy_version"]
"""What a failure breakdown groups by."""

BREAKDOWN_COLUMNS: dict[str, str] = {
    "category": "category",
    "task": "task_id",
    "family": "task_family",
    "policy_version": "policy_version",
}
"""The column each breakdown key groups on (``task_family`` comes from the ``episodes`` table)."""


@dataclass(frozen=True)
class JudgeVersionStats:
    """One version of a judge, as the ``rewards`` table knows it."""

    version: str
    episodes: int
    """Episodes it scored."""
    first_seen: dt.datetime
    """Time of its earliest reward: versions are content hashes, so this is their order."""
    last_seen: dt.datetime
    verdicts: dict[str, int] = field(default_factory=dict)
    """Episodes per verdict (``pass``, ``fail``, ``error``)."""


@dataclass(frozen=True)
class Cluster:
    """Failures sharing one error signature."""

    signature: str
    count: int
    category: str
    """The signature's category (the most frequent one should several share a signature)."""
    tasks: list[tuple[str | None, int]]
    """Tasks involved, with their failure count, most failures first."""
    example_episode_ids: list[str]
    example_message: str | None


@dataclass(frozen=True)
class VerdictDiff:
    """How the verdicts of two versions of one judge compare on the episodes both scored."""

    both: int
    only_from: int
    only_to: int
    matrix: dict[str, dict[str, int]]
    """``matrix[from verdict][to verdict]`` = episodes."""
    flips: pa.Table
    """``episode_id, from_verdict, to_verdict, from_score, to_score`` of every episode whose verdict changed,
    by ``episode_id``."""
    mean_score_from: float | None
    mean_score_to: float | None


# ------------------------------------------------------------------ judges


def judge_versions(rewards: pa.Table) -> dict[str, list[JudgeVersionStats]]:
    """Every judge in ``rewards`` with its versions, oldest first (by first reward), judges by name."""
    if rewards.num_rows == 0:
        return {}
    keys = ["judge_name", "judge_version"]
    per_version = rewards.group_by(keys).aggregate([("episode_id", "count"), ("ts", "min"), ("ts", "max")])
    per_verdict = rewards.group_by([*keys, "verdict"]).aggregate([("episode_id", "count")])
    verdicts: dict[tuple[str, str], dict[str, int]] = {}
    for row in per_verdict.to_pylist():
        verdicts.setdefault((row["judge_name"], row["judge_version"]), {})[row["verdict"]] = row[
            "episode_id_count"
        ]
    out: dict[str, list[JudgeVersionStats]] = {}
    for row in per_version.to_pylist():
        key = (row["judge_name"], row["judge_version"])
        out.setdefault(row["judge_name"], []).append(
            JudgeVersionStats(
                version=row["judge_version"],
                episodes=row["episode_id_count"],
                first_seen=row["ts_min"],
                last_seen=row["ts_max"],
                verdicts=dict(sorted(verdicts.get(key, {}).items())),
            )
        )
    return {name: sorted(vs, key=lambda v: (v.first_seen, v.version)) for name, vs in sorted(out.items())}


def _failure_versions(failures: pa.Table, judge: str) -> list[str]:
    rows = failures.filter(pc.equal(failures["judge_name"], judge))
    return sorted(pc.unique(rows["judge_version"]).to_pylist())


def choose_judge(
    known: Mapping[str, list[JudgeVersionStats]],
    judge: str | None,
    judge_version: str | None,
    *,
    failures: pa.Table | None = None,
    among_failures: bool = False,
) -> tuple[str | None, str | None]:
    """The (judge, version) a request means, defaulting what it leaves out.

    The default judge is the only one that scored episodes (``rewards``), or
    the only one with failures when nothing was scored. The default version is
    the latest one seen: the version whose first reward is the newest; versions
    only the ``failures`` table knows (no rewards: the no-judge ``-``) come
    before those. With ``among_failures``, only versions with rows in
    ``failures`` are candidates for the default (used when ``failures`` is an
    older snapshot than ``rewards``, so the default is the latest version as
    that snapshot knew it).

    Args:
        known: :func:`judge_versions` of the ``rewards`` snapshot.
        judge: the judge asked for, if any.
        judge_version: the version asked for, if any.
        failures: the ``failures`` snapshot, when failures are what is analysed.
        among_failures: restrict the default version to those in ``failures``.

    Returns:
        ``(judge, version)``; ``(None, None)`` when nothing was judged or failed yet.

    Raises:
        InvalidRequestError: no judge was named and several scored episodes.
        NotFoundError: the named judge or version does not exist.
    """
    if failures is None:
        failures = TABLES["failures"].empty_table()
    failing_judges = sorted(pc.unique(failures["judge_name"]).to_pylist()) if failures.num_rows else []
    if judge is None:
        candidates = sorted(known) or failing_judges
        if not candidates:
            if judge_version is not None:
                raise NotFoundError(f"no judge has a version {judge_version!r}: nothing was judged yet")
            return None, None
        if len(candidates) > 1:
            raise InvalidRequestError(
                f"several judges scored episodes ({', '.join(candidates)}): name one with judge=<name>"
            )
        judge = candidates[0]
    if judge not in known and judge not in failing_judges:
        names = sorted(set(known) | set(failing_judges))
        raise NotFoundError(
            f"no judge named {judge!r}"
            + (f"; judges: {', '.join(names)}" if names else ": nothing was judged yet")
        )
    in_failures = _failure_versions(failures, judge)
    seen = [v.version for v in known.get(judge, [])]
    ordered = [v for v in in_failures if v not in seen] + seen
    if judge_version is not None:
        if judge_version not in ordered:
            raise NotFoundError(
                f"judge {judge!r} has no version {judge_version!r}; its versions: {', '.join(ordered)}"
            )
        return judge, judge_version
    candidates = [v for v in ordered if v in in_failures] if among_failures else ordered
    return judge, (candidates or ordered)[-1]


def judged_by(table: pa.Table, judge: str | None, version: str | None) -> pa.Table:
    """Rows of ``rewards`` or ``failures`` of one judge version (none when the judge is ``None``)."""
    if judge is None or version is None:
        return table.slice(0, 0)
    mask = pc.and_(pc.equal(table["judge_name"], judge), pc.equal(table["judge_version"], version))
    return table.filter(mask)


# ------------------------------------------------------------------ episodes


def filter_rows(table: pa.Table, equals: Mapping[str, Any], ids: pa.Array | None = None) -> pa.Table:
    """Rows whose column equals the value, for every ``equals`` item whose value is not ``None``.

    Args:
        table: the rows.
        equals: column -> value (``None``: no filter on that column).
        ids: when given, only rows whose ``episode_id`` is among them.
    """
    mask: Any = None
    for column, value in equals.items():
        if value is None:
            continue
        m = pc.equal(table[column], pa.scalar(value, table.schema.field(column).type))
        mask = m if mask is None else pc.and_(mask, m)
    if ids is not None:
        m = pc.is_in(table["episode_id"], value_set=ids)
        mask = m if mask is None else pc.and_(mask, m)
    return table if mask is None else table.filter(mask)


def newest_first(episodes: pa.Table) -> pa.Table:
    """Episodes by start time, newest first (ties and unknown starts by ``episode_id``, descending).

    Episode ids are UUIDv7, time-ordered, so the tie-break is also newest first;
    episodes with no known start come last (Arrow sorts nulls at the end).
    """
    return episodes.sort_by([("started_at", "descending"), ("episode_id", "descending")])


def episodes_with_verdict(rewards: pa.Table, judge: str, version: str, verdict: str) -> pa.Array:
    """Ids of the episodes the judge version gave ``verdict``."""
    rows = judged_by(rewards, judge, version)
    return rows.filter(pc.equal(rows["verdict"], verdict))["episode_id"].combine_chunks()


# ------------------------------------------------------------------ failures


def breakdown_rows(failures: pa.Table, episodes: pa.Table | None, filters: dict[str, str | None]) -> pa.Table:
    """``failures`` with ``task_family`` joined from ``episodes``, restricted to ``filters``.

    Args:
        failures: failure rows (already restricted to one judge version).
        episodes: the ``episodes`` snapshot (None: no ``family`` column or filter is needed).
        filters: breakdown key -> the value its column must have (None: no filter on it).
    """
    wanted = {BREAKDOWN_COLUMNS[k]: v for k, v in filters.items() if v is not None}
    table = failures
    if episodes is not None and "task_family" not in table.schema.names:
        table = table.join(
            episodes.select(["episode_id", "task_family"]), keys="episode_id", join_type="left outer"
        )
    return filter_rows(table, wanted) if wanted else table


def crosstab(rows: pa.Table, by: str, then: str) -> list[tuple[str | None, str | None, int]]:
    """Failures per (``by``, ``then``) pair of :func:`breakdown_rows`, most first (then by names)."""
    a, b = BREAKDOWN_COLUMNS[by], BREAKDOWN_COLUMNS[then]
    if rows.num_rows == 0:
        return []
    grouped = rows.group_by([a, b]).aggregate([("episode_id", "count")])
    triples = zip(grouped[a].to_pylist(), grouped[b].to_pylist(), grouped["episode_id_count"].to_pylist(),
                  strict=True)  # fmt: skip
    return sorted(triples, key=lambda t: (-t[2], t[0] is None, t[0] or "", t[1] is None, t[1] or ""))


def breakdown(failures: pa.Table, by: str, episodes: pa.Table | None = None) -> list[tuple[str | None, int]]:
    """Failures per group, most first (then by group name; a null group last among equals).

    Args:
        failures: the failure rows to count (already restricted to one judge version).
        by: a key of :data:`BREAKDOWN_COLUMNS`.
        episodes: the ``episodes`` snapshot, needed for ``family``.
    """
    column = BREAKDOWN_COLUMNS[by]
    if failures.num_rows == 0:
        return []
    table = failures
    if column not in failures.schema.names:
        if episodes is None:
            raise ValueError(f"grouping by {by} needs the episodes table")
        table = failures.select(["episode_id"]).join(
            episodes.select(["episode_id", column]), keys="episode_id", join_type="left outer"
        )
    grouped = table.group_by(column).aggregate([("episode_id", "count")])
    pairs = zip(grouped[column].to_pylist(), grouped["episode_id_count"].to_pylist(), strict=True)
    return sorted(pairs, key=lambda kc: (-kc[1], kc[0] is None, kc[0] or ""))


def clusters(failures: pa.Table, *, min_size: int = 1, examples: int = 5) -> list[Cluster]:
    """Failures grouped by error signature, biggest first (then by signature).

    Args:
        failures: failure rows (already restricted to one judge version).
        min_size: smallest cluster returned.
        examples: example episode ids per cluster (the smallest ids: the oldest episodes).
    """
    if failures.num_rows == 0:
        return []
    # Sorted, and grouped without threads, so the per-group lists keep that order.
    ordered = failures.sort_by([("signature", "ascending"), ("episode_id", "ascending")])
    grouped = ordered.group_by("signature", use_threads=False).aggregate(
        [("episode_id", "count"), ("episode_id", "list"), ("message", "first")]
    )
    grouped = grouped.filter(pc.greater_equal(grouped["episode_id_count"], min_size))
    if grouped.num_rows == 0:
        return []
    kept = grouped["signature"].combine_chunks()
    rows = ordered.filter(pc.is_in(ordered["signature"], value_set=kept))
    per_task = rows.group_by(["signature", "task_id"]).aggregate([("episode_id", "count")]).to_pylist()
    per_category = rows.group_by(["signature", "category"]).aggregate([("episode_id", "count")]).to_pylist()
    tasks: dict[str, list[tuple[str | None, int]]] = {}
    for r in per_task:
        tasks.setdefault(r["signature"], []).append((r["task_id"], r["episode_id_count"]))
    categories: dict[str, list[tuple[int, str]]] = {}
    for r in per_category:
        categories.setdefault(r["signature"], []).append((r["episode_id_count"], r["category"]))
    # The signature starts with its category, so there is one; should a
    # signature ever span several, the most frequent (then first by name) wins.
    category = {sig: min(cs, key=lambda nc: (-nc[0], nc[1]))[1] for sig, cs in categories.items()}
    ids = pc.list_slice(grouped["episode_id_list"], 0, examples).to_pylist()
    out = [
        Cluster(
            signature=sig,
            count=n,
            category=category[sig],
            tasks=sorted(tasks[sig], key=lambda tc: (-tc[1], tc[0] is None, tc[0] or "")),
            example_episode_ids=list(example_ids),
            example_message=message,
        )
        for sig, n, example_ids, message in zip(
            grouped["signature"].to_pylist(),
            grouped["episode_id_count"].to_pylist(),
            ids,
            grouped["message_first"].to_pylist(),
            strict=True,
        )
    ]
    return sorted(out, key=lambda c: (-c.count, c.signature))


@dataclass(frozen=True)
class FailureCluster:
    """Failures of one task family, category and normalised signature: a candidate failure case."""

    cluster_id: str
    """``fc-`` and 12 hex digits of a hash of (family, category, signature): the same failure keeps
    its id as the lake grows and across judge versions, so a case can name it."""
    family: str | None
    category: str
    signature: str
    count: int
    """Failed episodes."""
    tasks: list[tuple[str | None, int]]
    """Tasks involved, with their failure count, most failures first."""
    trend: list[tuple[str | None, int]]
    """Failures per policy version, versions in the order they first acted (their first episode)."""
    examples: list[str]
    """The newest episodes of the cluster (by start, then id)."""
    message: str | None
    """The newest example's attribution message."""
    first_seen: dt.datetime | None
    last_seen: dt.datetime | None


def cluster_id(family: str | None, category: str, signature: str) -> str:
    """The id of the failure cluster of (family, category, signature): see :class:`FailureCluster`."""
    import hashlib

    key = "\x1f".join((family or "", category, signature)).encode()
    return "fc-" + hashlib.sha256(key).hexdigest()[:12]


def failure_clusters(
    failures: pa.Table, episodes: pa.Table, *, min_count: int = 1, examples: int = 5
) -> list[FailureCluster]:
    """Failures grouped by (task family, category, signature), biggest first (then by id).

    Args:
        failures: failure rows of one judge version.
        episodes: the ``episodes`` snapshot (task family, start time; policy versions' order).
        min_count: smallest cluster returned.
        examples: example episodes per cluster, newest first.
    """
    if failures.num_rows == 0:
        return []
    keys = ["task_family", "category", "signature"]
    meta = episodes.select(["episode_id", "task_family", "started_at"])
    cols = ["episode_id", "category", "signature", "task_id", "policy_version", "message"]
    rows = failures.select(cols).join(meta, keys="episode_id", join_type="left outer")
    # newest first, grouped without threads so that each group's lists keep that order
    rows = rows.sort_by([("started_at", "descending"), ("episode_id", "descending")])
    grouped = rows.group_by(keys, use_threads=False).aggregate(
        [("episode_id", "count"), ("episode_id", "list"), ("message", "first"),
         ("started_at", "min"), ("started_at", "max")]
    )  # fmt: skip
    grouped = grouped.filter(pc.greater_equal(grouped["episode_id_count"], min_count))
    if grouped.num_rows == 0:
        return []

    def per(column: str) -> dict[tuple[Any, ...], list[tuple[Any, int]]]:
        out: dict[tuple[Any, ...], list[tuple[Any, int]]] = {}
        for r in rows.group_by([*keys, column]).aggregate([("episode_id", "count")]).to_pylist():
            out.setdefault(tuple(r[k] for k in keys), []).append((r[column], r["episode_id_count"]))
        return out

    tasks, versions = per("task_id"), per("policy_version")
    # a policy version's place: when its first episode started (the episodes table knows them all)
    firsts = episodes.group_by("policy_version").aggregate([("started_at", "min")]).to_pylist()
    order = {r["policy_version"]: r["started_at_min"] for r in firsts}
    never = dt.datetime.max.replace(tzinfo=dt.UTC)

    def when(version: Any) -> tuple[dt.datetime, str]:
        return (order.get(version) or never, version or "")

    out = []
    for r, ids in zip(grouped.to_pylist(), pc.list_slice(grouped["episode_id_list"], 0, examples).to_pylist(),
                      strict=True):  # fmt: skip
        key = tuple(r[k] for k in keys)
        out.append(
            FailureCluster(
                cluster_id=cluster_id(key[0], key[1], key[2]),
                family=key[0],
                category=key[1],
                signature=key[2],
                count=r["episode_id_count"],
                tasks=sorted(tasks[key], key=lambda tc: (-tc[1], tc[0] is None, tc[0] or "")),
                trend=sorted(versions[key], key=lambda vc: when(vc[0])),
                examples=list(ids),
                message=r["message_first"],
                first_seen=r["started_at_min"],
                last_seen=r["started_at_max"],
            )
        )
    return sorted(out, key=lambda c: (-c.count, c.cluster_id))


def cases_by_cluster(failure_cases: pa.Table) -> dict[str, list[str]]:
    """The names of the curated cases (``failure_cases`` rows) saved from each cluster, sorted."""
    out: dict[str, list[str]] = {}
    for r in failure_cases.select(["case_id", "cluster_id"]).to_pylist():
        out.setdefault(r["cluster_id"], []).append(r["case_id"])
    return {k: sorted(v) for k, v in out.items()}


# ------------------------------------------------------------------ re-judge diff


def verdict_diff(rewards: pa.Table, judge: str, from_version: str, to_version: str) -> VerdictDiff:
    """Compare two versions of ``judge`` on the episodes both scored."""

    def side(version: str, prefix: str) -> pa.Table:
        rows = judged_by(rewards, judge, version).select(["episode_id", "verdict", "score"])
        return rows.rename_columns(["episode_id", f"{prefix}_verdict", f"{prefix}_score"])

    a, b = side(from_version, "from"), side(to_version, "to")
    both = a.join(b, keys="episode_id", join_type="inner")
    matrix: dict[str, dict[str, int]] = {}
    if both.num_rows:
        cells = both.group_by(["from_verdict", "to_verdict"]).aggregate([("episode_id", "count")])
        for r in sorted(cells.to_pylist(), key=lambda r: (r["from_verdict"], r["to_verdict"])):
            matrix.setdefault(r["from_verdict"], {})[r["to_verdict"]] = r["episode_id_count"]
    flips = both.filter(pc.not_equal(both["from_verdict"], both["to_verdict"])).sort_by("episode_id")
    flips = flips.select(["episode_id", "from_verdict", "to_verdict", "from_score", "to_score"])

    def mean(column: str) -> float | None:
        value = pc.mean(both[column]).as_py() if both.num_rows else None
        return None if value is None else float(value)

    return VerdictDiff(
        both=both.num_rows,
        only_from=a.num_rows - both.num_rows,
        only_to=b.num_rows - both.num_rows,
        matrix=matrix,
        flips=flips,
        mean_score_from=mean("from_score"),
        mean_score_to=mean("to_score"),
    )


# ------------------------------------------------------------------ checkpoints


JSON_DEPTH = 64
"""Deepest nesting of lake JSON the API parses; deeper documents are answered as their text."""


def _too_deep(value: Any, limit: int = JSON_DEPTH) -> bool:
    """Whether a parsed JSON value nests lists or objects deeper than ``limit`` (no recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, list | dict):
            if depth > limit:
                return True
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def parse_json(text: str | None) -> Any:
    """JSON text of a table column, parsed (``None`` stays ``None``; invalid JSON stays text).

    Lake JSON comes from outside (a policy's tool calls, an imported trajectory): a document
    nested deeper than :data:`JSON_DEPTH` stays text too, instead of exhausting the parser's stack.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return text if _too_deep(value) else value


def lineage(
    by_id: Mapping[str, dict[str, Any]], checkpoint_id: str
) -> tuple[list[dict[str, Any]], str | None]:
    """The checkpoint and its ancestors, newest first, and where the chain broke.

    Returns:
        ``(chain, broken_at)``: ``broken_at`` is the parent id that could not be
        followed (not in the table, or already in the chain: a loop), ``None``
        when the chain reaches a checkpoint without a parent.

    Raises:
        NotFoundError: ``checkpoint_id`` is not in the table.
    """
    if checkpoint_id not in by_id:
        raise NotFoundError(f"no checkpoint {checkpoint_id!r} in the checkpoints table")
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: str | None = checkpoint_id
    while current is not None:
        if current in seen or current not in by_id:
            return chain, current
        seen.add(current)
        chain.append(by_id[current])
        current = by_id[current]["parent_id"]
    return chain, None


# ------------------------------------------------------------------ text


def truncate(text: str | None, limit: int) -> tuple[str | None, bool]:
    """``text`` cut to ``limit`` characters, and whether it was cut."""
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit], True


def truncate_json(value: Any, limit: int, list_limit: int = 100, depth: int = JSON_DEPTH) -> tuple[Any, bool]:
    """A parsed JSON value cut to size: strings, lists, objects and nesting.

    Every string (object keys too) is cut to ``limit`` characters, every list and object to
    ``list_limit`` items, and what nests below ``depth`` is replaced by ``"…"``.

    Returns:
        The value and whether anything was cut.
    """
    if isinstance(value, str):
        return truncate(value, limit)
    if isinstance(value, list | dict) and depth <= 0:
        return "…", True
    if isinstance(value, list):
        items = [truncate_json(v, limit, list_limit, depth - 1) for v in value[:list_limit]]
        return [v for v, _ in items], len(value) > list_limit or any(c for _, c in items)
    if isinstance(value, dict):
        cut = len(value) > list_limit
        out = {}
        for k, v in list(value.items())[:list_limit]:
            key, key_cut = truncate(k, limit)
            out[key], c = truncate_json(v, limit, list_limit, depth - 1)
            cut = cut or c or key_cut
        return out, cut
    return value, False
