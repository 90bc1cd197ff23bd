"""The review queue: rules (data) that pick the episodes people should look at, each with its reason.

A rule is a mapping in a YAML file (default: ``api/review_rules.yaml``) with a
``name``, a ``kind`` from :data:`KINDS` (what it looks for: the only code) and
that kind's parameters. :func:`sample` applies the rules to the ``episodes``
and ``rewards`` tables and returns queue items; ``trajlake review fill``
publishes them as ``review_item:`` control streams, folded into
``review_queue``. Reviewers' verdicts are ``review:`` control streams, folded
into ``reviews`` (:mod:`schemas.control`).
"""

from __future__ import annotations

import hashlib
import random
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from schemas.errors import TrajlakeError

DEFAULT_RULES = Path(__file__).resolve().parent / "review_rules.yaml"
KINDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "flag": {"flags": list},
    "verdict_flip": {},
    "judge_disagreement": {},
    "surprising_success": {
        "max_tool_calls": int,
        "max_task_pass_rate": (int, float),
        "min_task_episodes": int,
    },
    "high_variance": {"min_std": (int, float)},
    "random": {"share": (int, float)},
}
"""Each kind of rule and the parameters it takes (all required; ``limit`` besides)."""


class ReviewRulesError(TrajlakeError):
    """A rules file that is not a list of valid rules."""


@dataclass(frozen=True)
class Rule:
    """One rule of the queue."""

    name: str
    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)
    limit: int = 100


@dataclass(frozen=True)
class QueueItem:
    """One episode a rule puts in the queue, and why."""

    item_id: str
    episode_id: str
    rule: str
    kind: str
    reason: str
    task_id: str | None
    task_family: str | None
    judge_name: str | None
    judge_version: str | None
    judge_verdict: str | None

    def row(self, *, queued_at: Any, fill_id: str) -> dict[str, Any]:
        """Its row of ``review_queue``."""
        return {**self.__dict__, "queued_at": queued_at, "fill_id": fill_id}


def item_id(episode_id: str, rule: str) -> str:
    """The queue item of one episode by one rule (``rv-`` and 12 hex): filling again finds the same."""
    return "rv-" + hashlib.sha256(f"{episode_id}\x1f{rule}".encode()).hexdigest()[:12]


def load_rules(path: Path | None = None) -> list[Rule]:
    """The rules of a YAML file (default: the shipped one), checked.

    Raises:
        ReviewRulesError: not YAML, not ``{rules: [...]}``, an unknown kind, a missing or unknown
            parameter, a duplicate name.
    """
    where = path or DEFAULT_RULES
    try:
        doc = yaml.safe_load(Path(where).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ReviewRulesError(f"cannot read review rules {where}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise ReviewRulesError(f"{where}: expected a mapping with a `rules` list")
    rules, seen = [], set()
    for i, raw in enumerate(doc["rules"]):
        if not isinstance(raw, dict):
            raise ReviewRulesError(f"{where}: rule {i} is not a mapping")
        raw = dict(raw)
        name, kind, limit = raw.pop("name", None), raw.pop("kind", None), raw.pop("limit", 100)
        if not isinstance(name, str) or not name:
            raise ReviewRulesError(f"{where}: rule {i} has no name")
        if name in seen:
            raise ReviewRulesError(f"{where}: two rules are named {name!r}")
        if kind not in KINDS:
            raise ReviewRulesError(f"{where}: rule {name!r} has kind {kind!r}; kinds are {', '.join(KINDS)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ReviewRulesError(f"{where}: rule {name!r}: limit must be a positive integer")
        want = KINDS[kind]
        unknown, missing = sorted(raw.keys() - want.keys()), sorted(want.keys() - raw.keys())
        if unknown or missing:
            raise ReviewRulesError(f"{where}: rule {name!r} ({kind}) takes {sorted(want) or 'no parameters'}"
                                   f"{f'; unknown: {unknown}' if unknown else ''}"
                                   f"{f'; missing: {missing}' if missing else ''}")  # fmt: skip
        for key, typ in want.items():
            if isinstance(raw[key], bool) or not isinstance(raw[key], typ):
                raise ReviewRulesError(f"{where}: rule {name!r}: {key} has the wrong type ({raw[key]!r})")
        seen.add(name)
        rules.append(Rule(name, kind, raw, limit))
    return rules


@dataclass
class _Judged:
    episode_id: str
    task_id: str | None
    family: str | None
    group_id: str | None
    tool_calls: int
    online: tuple[str, str, str, float, list[str]] | None = None
    """The judgement made in the rollout: (judge, version, verdict, score, flags)."""
    all: list[tuple[str, str, str, float, list[str]]] = field(default_factory=list)


def _judged(episodes: pa.Table, rewards: pa.Table) -> dict[str, _Judged]:
    out: dict[str, _Judged] = {}
    for e in episodes.select(
        ["episode_id", "task_id", "task_family", "group_id", "num_tool_calls", "status"]
    ).to_pylist():
        if e["status"] in ("success", "failure", "truncated"):
            out[e["episode_id"]] = _Judged(e["episode_id"], e["task_id"], e["task_family"], e["group_id"],
                                           int(e["num_tool_calls"] or 0))  # fmt: skip
    cols = ["episode_id", "judge_name", "judge_version", "verdict", "score", "flags", "source", "ts"]
    for r in sorted(rewards.select(cols).to_pylist(), key=lambda r: r["ts"]):
        j = out.get(r["episode_id"])
        if j is None:
            continue
        t = (r["judge_name"], r["judge_version"], r["verdict"], float(r["score"]), list(r["flags"] or []))
        j.all.append(t)
        if r["source"] == "online":
            j.online = t
    return {k: v for k, v in out.items() if v.all}


def sample(
    episodes: pa.Table,
    rewards: pa.Table,
    rules: Iterable[Rule],
    *,
    exclude: Iterable[str] = (),
    reviewed: Iterable[str] = (),
    seed: int = 0,
) -> list[QueueItem]:
    """The queue items the rules find (``exclude``: item ids already queued; ``reviewed``: episode ids).

    Each rule adds at most its ``limit`` items, newest episodes first within a rule (ids are
    UUIDv7: time-ordered) except ``random``, which draws uniformly with ``seed``.
    """
    judged = _judged(episodes, rewards)
    skip_items, skip_eps = set(exclude), set(reviewed)
    order = sorted(judged, reverse=True)
    out: list[QueueItem] = []
    for rule in rules:
        found = list(_FINDERS[rule.kind](rule, judged, order, seed))
        added = 0
        for eid, reason, judgement in found:
            iid = item_id(eid, rule.name)
            if iid in skip_items or eid in skip_eps:
                continue
            j = judged[eid]
            name, version, verdict = judgement[:3] if judgement else (None, None, None)
            out.append(QueueItem(iid, eid, rule.name, rule.kind, reason, j.task_id, j.family, name, version,
                                 verdict))  # fmt: skip
            skip_items.add(iid)
            added += 1
            if added >= rule.limit:
                break
    return out


_Found = Iterable[tuple[str, str, tuple[str, str, str, float, list[str]] | None]]


def _flag(rule: Rule, judged: dict[str, _Judged], order: list[str], seed: int) -> _Found:
    wanted = set(rule.params["flags"])
    for eid in order:
        for t in judged[eid].all:
            hit = sorted(wanted & set(t[4]))
            if hit:
                yield eid, f"{t[0]} {t[1]} flagged it {', '.join(hit)} (verdict {t[2]}, score {t[3]:.2f})", t
                break


def _flip(rule: Rule, judged: dict[str, _Judged], order: list[str], seed: int) -> _Found:
    for eid in order:
        by_judge: dict[str, list[tuple[str, str, str, float, list[str]]]] = defaultdict(list)
        for t in judged[eid].all:
            by_judge[t[0]].append(t)
        for name, ts in sorted(by_judge.items()):
            passes = {t[1]: t[2] == "pass" for t in ts}
            if len(set(passes.values())) > 1:
                a = next(t for t in ts if t[2] == "pass")
                b = next(t for t in ts if t[2] != "pass")
                yield eid, f"{name} {a[1]} says pass, {name} {b[1]} says {b[2]}", b
                break


def _disagree(rule: Rule, judged: dict[str, _Judged], order: list[str], seed: int) -> _Found:
    for eid in order:
        j = judged[eid]
        base = j.online or j.all[0]
        other = next((t for t in j.all if t[0] != base[0] and (t[2] == "pass") != (base[2] == "pass")), None)
        if other is not None:
            yield eid, f"{base[0]} {base[1]} says {base[2]}, {other[0]} {other[1]} says {other[2]}", base


def _surprising(rule: Rule, judged: dict[str, _Judged], order: list[str], seed: int) -> _Found:
    p = rule.params
    per_task: dict[str, list[bool]] = defaultdict(list)
    for j in judged.values():
        t = j.online or j.all[0]
        per_task[j.task_id or ""].append(t[2] == "pass")
    for eid in order:
        j = judged[eid]
        t = j.online or j.all[0]
        runs = per_task[j.task_id or ""]
        rate = sum(runs) / len(runs)
        if (t[2] == "pass" and j.tool_calls <= p["max_tool_calls"] and len(runs) >= p["min_task_episodes"]
                and rate <= p["max_task_pass_rate"]):  # fmt: skip
            yield eid, (f"passed in {j.tool_calls} tool calls on {j.task_id}, whose pass rate is {rate:.0%} "
                        f"over {len(runs)} episodes"), t  # fmt: skip


def _variance(rule: Rule, judged: dict[str, _Judged], order: list[str], seed: int) -> _Found:
    groups: dict[str, list[str]] = defaultdict(list)
    for eid in order:
        if judged[eid].group_id:
            groups[judged[eid].group_id].append(eid)  # type: ignore[index]
    found = []
    for g, eids in groups.items():
        scored = [(judged[e].online or judged[e].all[0], e) for e in eids]
        if len(scored) < 2:
            continue
        scores = [t[3] for t, _ in scored]
        std = statistics.pstdev(scores)
        if std >= rule.params["min_std"]:
            best, eid = max(scored, key=lambda s: (s[0][3], s[1]))
            mean = statistics.fmean(scores)
            reason = (f"group {g}: scores spread {std:.2f} (sd) over {len(scores)} episodes; this one "
                      f"scored {best[3]:.2f} against a mean of {mean:.2f}")  # fmt: skip
            found.append((std, eid, reason, best))
    for _, eid, reason, t in sorted(found, key=lambda f: (-f[0], f[1])):
        yield eid, reason, t


def _random(rule: Rule, judged: dict[str, _Judged], order: list[str], seed: int) -> _Found:
    rng = random.Random(f"{seed}\x1f{rule.name}")
    share = float(rule.params["share"])
    for eid in sorted(judged):
        if rng.random() < share:
            t = judged[eid].online or judged[eid].all[0]
            yield eid, f"a uniform {share:.0%} sample for calibration", t


_FINDERS = {
    "flag": _flag,
    "verdict_flip": _flip,
    "judge_disagreement": _disagree,
    "surprising_success": _surprising,
    "high_variance": _variance,
    "random": _random,
}


class UnknownEpisodeError(TrajlakeError):
    """A verdict on an episode the lake does not hold."""


def review_row(
    episodes: pa.Table,
    queue: pa.Table,
    rewards: pa.Table,
    *,
    episode_id: str,
    reviewer: str,
    verdict: str,
    note: str | None,
    reviewed_at: Any,
) -> dict[str, Any]:
    """The ``reviews`` row of a verdict.

    The judgement it is about is the queue item's (the newest one queued for the episode), else
    the episode's online judgement.

    Raises:
        UnknownEpisodeError: the ``episodes`` table has no such episode.
    """
    import pyarrow.compute as pc

    if not episodes.num_rows or not pc.any(pc.equal(episodes["episode_id"], episode_id)).as_py():
        raise UnknownEpisodeError(f"no episode {episode_id!r} in the lake (fold the log first?)")
    items = queue.filter(pc.equal(queue["episode_id"], episode_id)).to_pylist() if queue.num_rows else []
    item = max(items, key=lambda r: r["queued_at"]) if items else None
    judgement: tuple[Any, Any, Any] = (None, None, None)
    if item is not None:
        judgement = (item["judge_name"], item["judge_version"], item["judge_verdict"])
    elif rewards.num_rows:
        online = [r for r in rewards.filter(pc.equal(rewards["episode_id"], episode_id)).to_pylist()
                  if r["source"] == "online"]  # fmt: skip
        if online:
            r = max(online, key=lambda r: r["ts"])
            judgement = (r["judge_name"], r["judge_version"], r["verdict"])
    return {
        "episode_id": episode_id,
        "reviewer": reviewer,
        "verdict": verdict,
        "note": note,
        "item_id": item["item_id"] if item else None,
        "judge_name": judgement[0],
        "judge_version": judgement[1],
        "judge_verdict": judgement[2],
        "reviewed_at": reviewed_at,
    }


def queue_items(
    queue: pa.Table, reviews: pa.Table, *, status: str = "open", rules: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The queue's items, newest first, each with its verdicts (``status``: open, reviewed or all)."""
    by_episode: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in reviews.to_pylist():
        by_episode[r["episode_id"]].append(r)
    wanted = set(rules) if rules else None
    out = []
    for it in sorted(queue.to_pylist(), key=lambda r: (r["queued_at"], r["item_id"]), reverse=True):
        if wanted is not None and it["rule"] not in wanted:
            continue
        done = sorted(by_episode.get(it["episode_id"], []), key=lambda r: r["reviewed_at"])
        if (status == "open" and done) or (status == "reviewed" and not done):
            continue
        out.append({**it, "reviews": done})
    return out
