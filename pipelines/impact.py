"""A gate on judge changes: what a new judge version would do to recorded episodes, before it scores any.

:func:`impact` re-judges a selection of recorded episodes from their archived
final states with the new judge (a dry run: nothing reaches the log) and
compares each judgement with the one the lake holds now (the latest by another
version of the same judge, else the rollout's online judgement): verdict flips
by task family, groups whose advantages change sign (a member the learner
pushed toward becomes one it pushes away from, or the other way), and groups
that become constant (no signal left). ``trajlake judges impact`` prints it and
fails above ``--max-flip-rate``, so a judge change can be gated in CI.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ingest.blobs import BlobStore
from ingest.sink import MemorySink
from judges.registry import build_judge
from judges.tasks import Task
from lake import Lake
from pipelines.errors import PipelineError
from pipelines.rejudge import RejudgeItem, RejudgeSelection, rejudge
from sandboxes.pool import SandboxPool

EPS = 1e-9


class ImpactError(PipelineError):
    """The impact of a judge change cannot be measured (a bad filter, no lake)."""


@dataclass(frozen=True)
class Compared:
    """One episode judged by the current version and by the new one."""

    episode_id: str
    task_id: str
    family: str | None
    group_id: str | None
    old_judge: str
    old_verdict: str
    old_score: float
    new_verdict: str
    new_score: float

    @property
    def flipped(self) -> bool:
        """Pass against not pass."""
        return (self.old_verdict == "pass") != (self.new_verdict == "pass")


@dataclass
class ImpactReport:
    """What the new judge version would change."""

    judge_name: str
    judge_version: str
    selected: int
    compared: list[Compared] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    errors: list[RejudgeItem] = field(default_factory=list)
    sign_changed: list[dict[str, Any]] = field(default_factory=list)
    became_constant: list[str] = field(default_factory=list)
    groups_checked: int = 0

    @property
    def flips(self) -> list[Compared]:
        """The episodes whose verdict flips."""
        return [c for c in self.compared if c.flipped]

    @property
    def flip_rate(self) -> float:
        """Flips over episodes compared (0 when none was)."""
        return len(self.flips) / len(self.compared) if self.compared else 0.0

    def by_family(self) -> dict[str, dict[str, int]]:
        """Per task family: compared, flips, pass -> not pass, not pass -> pass."""
        out: dict[str, dict[str, int]] = defaultdict(lambda: {"compared": 0, "flips": 0, "pass_to_fail": 0,
                                                              "fail_to_pass": 0})  # fmt: skip
        for c in self.compared:
            row = out[c.family or "-"]
            row["compared"] += 1
            if c.flipped:
                row["flips"] += 1
                row["pass_to_fail" if c.old_verdict == "pass" else "fail_to_pass"] += 1
        return dict(sorted(out.items()))


def _sign(x: float) -> int:
    return 0 if abs(x) <= EPS else (1 if x > 0 else -1)


def group_changes(
    groups: Mapping[str, Sequence[tuple[str, float, float]]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Groups whose advantages change sign, and groups that become constant.

    ``groups`` maps a group id to ``(episode, old score, new score)`` of every member. A group
    becomes constant when it had a signal and has none. A member's advantage is its score minus
    its group's mean (the sign a group-relative learner sees, whatever the scaling).
    """
    changed, constant = [], []
    for gid, members in sorted(groups.items()):
        if len(members) < 2:
            continue
        old = [o for _, o, _ in members]
        new = [n for _, _, n in members]
        mo, mn = statistics.fmean(old), statistics.fmean(new)
        flipped = [eid for eid, o, n in members if _sign(o - mo) * _sign(n - mn) < 0]
        if flipped:
            changed.append({"group_id": gid, "episodes": flipped})
        if max(old) - min(old) > EPS and max(new) - min(new) <= EPS:
            constant.append(gid)
    return changed, constant


def _baseline(rows: list[dict[str, Any]], name: str, version: str) -> dict[str, Any] | None:
    same = [r for r in rows if r["judge_name"] == name and r["judge_version"] != version]
    if same:
        return max(same, key=lambda r: r["ts"])
    online = [r for r in rows if r["source"] == "online"]
    return max(online, key=lambda r: r["ts"]) if online else None


def select_episodes(lake: Lake, where: str | None, sample: int | None, seed: int) -> list[dict[str, Any]]:
    """The complete, judged episodes ``where`` (SQL over ``episodes``) selects.

    With ``sample``, whole groups are drawn at random (seeded) until that many episodes.

    Raises:
        ImpactError: the filter is not a valid predicate over ``episodes``.
    """
    from lake import LakeError

    if not lake.exists("episodes"):
        raise ImpactError(f"the lake at {lake.root} has no episodes yet (fold the log first)")
    base = "completeness = 'complete' AND status IN ('success', 'failure', 'truncated')"
    try:
        rows = lake.read("episodes", where=f"{base} AND ({where})" if where else base).to_pylist()
    except LakeError as exc:
        raise ImpactError(f"--where {where!r} is not a predicate over the episodes table: {exc}") from None
    if sample is None or sample >= len(rows):
        return rows
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["group_id"] or r["episode_id"]].append(r)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    out: list[dict[str, Any]] = []
    for g in order:
        if len(out) >= sample:
            break
        out += groups[g]
    return out


def impact(
    lake: Lake,
    tasks: Mapping[str, Task],
    pool: SandboxPool,
    blobs: BlobStore,
    judge_spec: Mapping[str, Any],
    *,
    where: str | None = None,
    sample: int | None = None,
    seed: int = 0,
    workers: int = 2,
    on_selected: Callable[[int], None] | None = None,
    on_item: Callable[[RejudgeItem], None] | None = None,
) -> ImpactReport:
    """Judge the selected episodes with ``judge_spec`` (nothing is published) and compare (module doc)."""
    judge = build_judge(dict(judge_spec))
    episodes = select_episodes(lake, where, sample, seed)
    report = ImpactReport(judge.name, judge.version, selected=len(episodes))
    if on_selected:
        on_selected(len(episodes))
    if not episodes:
        return report
    ids = tuple(e["episode_id"] for e in episodes)
    run = rejudge(lake, tasks, pool, MemorySink(), blobs, topic="trajlake.impact-dry-run",
                  judge_spec=judge_spec, selection=RejudgeSelection(episode_ids=ids), force=True,
                  workers=workers, on_item=on_item)  # fmt: skip
    rewards: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
        for r in lake.read_episodes_rows("rewards", list(chunk)).to_pylist():
            rewards[r["episode_id"]].append(r)
    by_id = {e["episode_id"]: e for e in episodes}
    for item in run.items:
        if item.outcome == "error":
            report.errors.append(item)
            continue
        if item.outcome != "judged" or item.verdict is None or item.score is None:
            report.skipped[(item.reason or "not judged").split(":")[0]] += 1
            continue
        base = _baseline(rewards.get(item.episode_id, []), judge.name, judge.version)
        if base is None:
            report.skipped["no current judgement to compare with"] += 1
            continue
        ep = by_id[item.episode_id]
        report.compared.append(Compared(
            episode_id=item.episode_id, task_id=item.task_id, family=ep["task_family"],
            group_id=ep["group_id"],
            old_judge=f"{base['judge_name']} {base['judge_version']}", old_verdict=base["verdict"],
            old_score=float(base["score"]), new_verdict=item.verdict, new_score=float(item.score),
        ))  # fmt: skip
    groups: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for c in report.compared:
        if c.group_id:
            groups[c.group_id].append((c.episode_id, c.old_score, c.new_score))
    whole = {g: m for g, m in groups.items() if len(m) == sum(1 for e in episodes if e["group_id"] == g)}
    report.groups_checked = sum(1 for m in whole.values() if len(m) >= 2)
    report.sign_changed, report.became_constant = group_changes(whole)
    return report
