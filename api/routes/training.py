"""``/episodes/{id}/training``: what the learner made of an episode.

The lake records what a checkpoint trained on only as its lineage (``checkpoints``: the Delta
version of every table its dataset read, its judge name and version, its parent, and in
``metrics`` its selection, arguments and the samples it left out, counted by reason), not as a
list of episodes. So the answer recomputes each checkpoint's dataset for this one episode from the
tables at the versions the checkpoint pinned, by the learner's own rules:

1. the episode selection (eval split and eval runs, the selection's tasks and families,
   retractions, lost events, open episodes, unlearnable statuses, missing or ``error`` rewards,
   groups trained only whole, waiting at most ``max_group_wait_s`` of log time): the learner's own
   :func:`lake.selection.trainable`, which ``learners.dataset`` selects its data with and which
   lives in ``lake`` because the API may import only ``lake`` and ``schemas``
   (``tests/test_dependency_rule.py``); likewise the retraction matching
   (:class:`lake.selection.Retracted`) and the group-relative advantage
   (:func:`lake.selection.group_advantages_np`). ``tests/api/test_training_view.py`` checks the
   answer against the learner's own ``train`` on a lake built by the pipeline;
2. an incremental step's ``since``: what its parent's snapshot held trainable already is not read
   again (``read_by_parent``);
3. the ``samples`` rows (``learners.dataset._trainable_rows``): a row with a ``problem``, or an
   episode without rows, takes its group out;
4. the step's own filters (``learners.trainer.train``): ``max_policy_lag``, ``token_out_of_vocab``
   and ``zero_advantage_group``.

Steps 2 to 4 are still restated here, per episode, from ``learners`` (which the API may not import).

What cannot be told is said (``trained`` null): a lineage without ``samples``, ``selection`` or
its parent, a pinned version that can no longer be read, and ``token_out_of_vocab`` when the
checkpoint left samples out for it (the model's vocabulary size is not in the table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
from fastapi import APIRouter, Path

from api.analysis import filter_rows, parse_json
from api.deps import ReaderDep
from api.errors import ApiError, NotFoundError
from api.lake_reader import LakeReader, versions_of
from api.models import (
    EpisodeTrainingPublic,
    RetractionHitPublic,
    TrainingSamplePublic,
    TrainingVerdictPublic,
)
from lake.selection import (
    LEARNABLE,
    TABLES_READ,
    WAITING,
    Picked,
    Retracted,
    group_advantages_np,
    group_key,
    retractions_hitting,
    trainable,
)
from lake.splits import splits_of
from schemas.tables import TABLES

router = APIRouter(prefix="/episodes", tags=["episodes"])

TRAIN_DEFAULTS: dict[str, Any] = {"incremental": True, "drop_zero_advantage_groups": True,
                                  "scale_advantages": True}  # fmt: skip
"""``learners.trainer.TrainArgs`` defaults of the arguments read here, for a lineage without them."""


# ------------------------------------------------------------------ the episode selection


@dataclass(frozen=True)
class Selection:
    """What a checkpoint's dataset selected by (its judge and ``metrics.selection``)."""

    judge_name: str
    judge_version: str | None
    tasks: frozenset[str] | None
    families: frozenset[str] | None
    max_group_wait_s: float | None


def pick(
    episodes: pa.Table,
    rewards: pa.Table,
    sel: Selection,
    retracted: Retracted,
    eval_tasks: frozenset[str],
) -> Picked:
    """The learner's episode selection of one snapshot (:func:`lake.selection.trainable`)."""
    return trainable(
        episodes, rewards, judge_name=sel.judge_name, judge_version=sel.judge_version, task_ids=sel.tasks,
        families=sel.families, max_group_wait_s=sel.max_group_wait_s, retracted=retracted,
        eval_tasks=eval_tasks,
    )  # fmt: skip


# ------------------------------------------------------------------ one checkpoint


class Undetermined(Exception):
    """What the lake does not say about a checkpoint's data (the answer's ``trained`` is null)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass
class Lineage:
    """A ``checkpoints`` row, parsed."""

    row: dict[str, Any]
    versions: dict[str, int]
    metrics: dict[str, Any]

    @classmethod
    def of(cls, row: dict[str, Any]) -> Lineage:
        """A row of ``checkpoints``, its JSON columns parsed."""
        versions = parse_json(row["table_versions"])
        metrics = parse_json(row["metrics"])
        return cls(
            row,
            {k: int(v) for k, v in versions.items()} if isinstance(versions, dict) else {},
            metrics if isinstance(metrics, dict) else {},
        )

    @property
    def id(self) -> str:
        """The checkpoint's id."""
        return str(self.row["checkpoint_id"])

    def arg(self, name: str) -> Any:
        """A ``TrainArgs`` field the step recorded (its default where the lineage has none)."""
        args = self.metrics.get("args")
        return args.get(name, TRAIN_DEFAULTS[name]) if isinstance(args, dict) else TRAIN_DEFAULTS[name]

    def selection(self, judge_version: str | None = None) -> Selection:
        """What its dataset selected by (with another judge version: its parent's, for ``since``)."""
        sel = self.metrics["selection"]
        tasks, families = sel.get("tasks"), sel.get("families")
        return Selection(
            self.row["judge_name"],
            judge_version if judge_version is not None else self.row["judge_version"],
            frozenset(tasks) if tasks is not None else None,
            frozenset(families) if families is not None else None,
            sel.get("max_group_wait_s"),
        )


def _read(reader: LakeReader, table: str, version: int | None) -> pa.Table:
    """``table`` at a pinned ``version`` (None: the lineage pinned none, so none was read)."""
    if version is None:
        return TABLES[table].empty_table()
    try:
        return reader.snapshot(table, version).table
    except ApiError as exc:
        raise Undetermined(
            "snapshot_unreadable", f"version {version} of {table} it pinned cannot be read: {exc}"
        ) from exc


def _rows(reader: LakeReader, table: str, episode_id: str, version: int) -> pa.Table:
    """The rows of one episode in ``table`` at a pinned ``version``."""
    try:
        return reader.rows_where(table, "episode_id", episode_id, version).table
    except ApiError as exc:
        raise Undetermined(
            "snapshot_unreadable", f"version {version} of {table} it pinned cannot be read: {exc}"
        ) from exc


def picked_at(reader: LakeReader, versions: Mapping[str, int], sel: Selection) -> Picked:
    """The episode selection at a lineage's pinned versions (memoised per versions and selection)."""
    try:
        episodes = reader.snapshot("episodes", versions["episodes"])
    except ApiError as exc:
        raise Undetermined(
            "snapshot_unreadable",
            f"version {versions['episodes']} of episodes it pinned cannot be read: {exc}",
        ) from exc
    ret_v, tasks_v, rewards_v = versions.get("retractions"), versions.get("tasks"), versions.get("rewards")
    purpose = ("learner_selection", rewards_v, ret_v, tasks_v, sel)

    def compute(table: pa.Table) -> Picked:
        # (a parent that pinned no rewards: the learner reads none)
        rewards = (
            _read(reader, "rewards", rewards_v) if rewards_v is not None else TABLES["rewards"].empty_table()
        )
        retractions = _read(reader, "retractions", ret_v)
        tasks = _read(reader, "tasks", tasks_v)
        eval_tasks = frozenset(
            t for t, s in (splits_of(tasks) if tasks.num_rows else {}).items() if s == "eval"
        )
        return pick(table, rewards, sel, Retracted.of(retractions.to_pylist()), eval_tasks)

    return reader.derived(episodes, purpose, compute)


def _ancestors(by_id: Mapping[str, Lineage], parent_id: str | None) -> list[str]:
    """``learners.trainer._parent_lineage``: the parent and its ancestors (only the parent if broken)."""
    if parent_id is None:
        return []
    chain: list[str] = []
    current: str | None = parent_id
    while current is not None:
        if current not in by_id or current in chain:
            return [parent_id]
        chain.append(current)
        current = by_id[current].row["parent_id"]
    return chain


def advantage(rewards: Mapping[str, float], episode_id: str, scale: bool) -> float:
    """The group-relative advantage the learner gives ``episode_id`` in its group of ``rewards``.

    The learner's :func:`lake.selection.group_advantages_np`, over the group's episodes in the
    order a sample set holds them (by episode id), so the sums run in the same order.
    """
    members = sorted(rewards)
    values = np.asarray([rewards[e] for e in members], dtype=np.float64)
    per_episode = group_advantages_np(values, np.zeros(len(members), dtype=np.int64), scale=scale)
    return float(per_episode[members.index(episode_id)])


SENTENCES = {
    "eval": "an evaluation episode (an eval run's, or of a task in the eval split): measured on, never "
    "trained on",
    "outside_selection": "outside the checkpoint's selection ({selection})",
    "retracted": "retracted ({retractions}) in the retractions the checkpoint read",
    "gap": "events of it were lost (completeness gap): it is never whole",
    "incomplete": "still open at the checkpoint's snapshot",
    "no_reward": "{judge} had not scored it yet at the checkpoint's snapshot",
    "reward_error": "{judge} answered error on it: no signal about the policy",
    "partial_group": "its group {group} lost {lost}: a baseline over the rest would not be the group's",
    "group_expired": "its group {group} was not whole within {wait} s of log time after its first member "
    "ended{when}",
    "group_waiting": "its group {group} was still waiting for members ({waiting})",
    "read_by_parent": "the snapshot of its parent {parent} held it trainable already: an incremental step "
    "reads only what became trainable since",
    "no_samples": "it has no row in samples (no model call, or its samples were not folded yet)",
    "policy_lag": "its policy version {policy} is {lag} behind the parent (max_policy_lag {max})",
    "zero_advantage_group": "every episode of its group {group} got reward {reward}: advantages all 0, "
    "and the step drops such groups",
    "problem": "its samples row says {problem}: the learner cannot train on it",
}


@dataclass
class Verdict:
    """One checkpoint and this episode."""

    trained: bool | None
    reason: str | None = None
    detail: str = ""
    reward: float | None = None
    advantage: float | None = None
    sequences: int = 0
    group: dict[str, float] = field(default_factory=dict)


def _partial(lost: Mapping[str, str]) -> str:
    return ", ".join(f"{e} ({r})" for e, r in sorted(lost.items()))


def checkpoint_verdict(
    reader: LakeReader, ck: Lineage, by_id: Mapping[str, Lineage], episode_id: str
) -> Verdict | None:
    """Whether ``ck`` trained on the episode, and why not (None: its snapshot did not hold it)."""
    try:
        return _verdict(reader, ck, by_id, episode_id)
    except Undetermined as why:
        return Verdict(None, why.reason, why.detail)


def _verdict(reader: LakeReader, ck: Lineage, by_id: Mapping[str, Lineage], eid: str) -> Verdict | None:
    if not _rows(reader, "episodes", eid, ck.versions["episodes"]).num_rows:
        return None
    missing = [t for t in TABLES_READ if t not in ck.versions]
    if missing or not ck.row["judge_name"] or not isinstance(ck.metrics.get("selection"), dict):
        what = [f"no {t} version" for t in missing]
        what += [] if ck.row["judge_name"] else ["no judge"]
        what += [] if isinstance(ck.metrics.get("selection"), dict) else ["no selection"]
        raise Undetermined(
            "lineage_incomplete",
            f"its lineage records {', '.join(what)}: its dataset cannot be read again",
        )
    sel = ck.selection()
    judge = f"judge {sel.judge_name} {sel.judge_version}"
    now = picked_at(reader, ck.versions, sel)
    ep = now.by_id[eid]
    group = group_key(ep)
    if eid not in now.keep:
        reason = now.why.get(eid, "outside_selection")
        return Verdict(False, reason, _sentence(reason, now, ck, eid, judge, reader))
    keep = {e: now.keep[e] for e in now.members.get(group, []) if e in now.keep}
    parent_id = ck.row["parent_id"]
    if parent_id is not None and ck.arg("incremental"):
        parent = by_id.get(parent_id)
        if parent is None:
            raise Undetermined(
                "lineage_incomplete",
                f"its parent {parent_id} is not in the checkpoints table: what the step read as new cannot "
                "be told",
            )
        if parent.row["lake_uri"] and "episodes" in parent.versions:
            before = picked_at(
                reader, parent.versions, ck.selection(parent.row["judge_version"] or sel.judge_version)
            )
            for e in list(keep):
                if e in before.keep or before.why.get(e) == "group_expired":
                    del keep[e]
            if eid not in keep:
                if eid in before.keep:
                    text = SENTENCES["read_by_parent"].format(parent=parent_id)
                    return Verdict(False, "read_by_parent", text)
                text = _sentence(
                    "group_expired", before, ck, eid, judge, reader, " (at the parent's snapshot)"
                )
                return Verdict(False, "group_expired", text)
    # the samples rows of the group's kept members (learners.dataset._trainable_rows)
    rows: dict[str, list[dict[str, Any]]] = {}
    for e in keep:
        rows[e] = _rows(reader, "samples", e, ck.versions["samples"]).select(["problem"]).to_pylist()
    own = rows[eid]
    if not own:
        return Verdict(False, "no_samples", SENTENCES["no_samples"])
    problems = sorted({r["problem"] for r in own if r["problem"] is not None})
    if problems:
        return Verdict(False, problems[0], SENTENCES["problem"].format(problem=", ".join(problems)))
    bad = {e: "no_samples" for e, rs in rows.items() if not rs}
    bad |= {e: next(r["problem"] for r in rs if r["problem"]) for e, rs in rows.items() if any(
        r["problem"] for r in rs)}  # fmt: skip
    if bad:
        return Verdict(
            False, "partial_group", SENTENCES["partial_group"].format(group=group, lost=_partial(bad))
        )
    # the step's own filters (learners.trainer.train), group by group
    max_lag = ck.metrics["selection"].get("max_policy_lag")
    if max_lag is not None:
        chain = _ancestors(by_id, parent_id)
        late = {}
        for e in keep:
            pv = keep[e]["policy_version"] or ""
            lag = chain.index(pv) if pv in chain else None
            if lag is None or lag > max_lag:
                late[e] = "not in the parent's lineage" if lag is None else f"{lag} versions"
        if eid in late:
            pv = keep[eid]["policy_version"] or ""
            text = SENTENCES["policy_lag"].format(policy=pv, lag=late[eid], max=max_lag)
            return Verdict(False, "policy_lag", text)
        if late:
            lost = _partial(dict.fromkeys(late, "policy_lag"))
            return Verdict(False, "partial_group", SENTENCES["partial_group"].format(group=group, lost=lost))
    excluded = ck.metrics.get("samples_excluded") or ck.metrics.get("skipped") or {}
    if isinstance(excluded, dict) and excluded.get("token_out_of_vocab"):
        raise Undetermined(
            "token_out_of_vocab_unknown",
            f"the step left {excluded['token_out_of_vocab']} samples out as token_out_of_vocab, and the "
            "model's vocabulary size is not in the lake: whether this group was among them cannot be told",
        )
    rewards = [now.score[e] for e in keep]
    if ck.arg("drop_zero_advantage_groups") and max(rewards) == min(rewards):
        text = SENTENCES["zero_advantage_group"].format(group=group, reward=rewards[0])
        return Verdict(False, "zero_advantage_group", text)
    return Verdict(
        True,
        reward=now.score[eid],
        advantage=advantage({e: now.score[e] for e in keep}, eid, bool(ck.arg("scale_advantages"))),
        sequences=len(own),
        group={e: now.score[e] for e in sorted(keep)},
        detail=f"trained on with {judge}'s reward, its group {group} of {len(keep)}",
    )


def _sentence(
    reason: str, picked: Picked, ck: Lineage, eid: str, judge: str, reader: LakeReader, when: str = ""
) -> str:
    ep = picked.by_id[eid]
    group = group_key(ep)
    if reason.startswith("status:"):
        status = reason.removeprefix("status:")
        return f"it ended {status}: only {', '.join(LEARNABLE)} episodes are learned from"
    if reason == "outside_selection":
        sel = ck.metrics["selection"]
        parts = [f"{k} {', '.join(sel[k])}" for k in ("tasks", "families") if sel.get(k) is not None]
        return SENTENCES[reason].format(selection="; ".join(parts))
    if reason == "retracted":
        retractions = _read(reader, "retractions", ck.versions.get("retractions")).to_pylist()
        rows = retractions_hitting(retractions, ep, (ck.row["judge_name"], ck.row["judge_version"]))
        return SENTENCES[reason].format(
            retractions=", ".join(f"{r['retraction_id']}: {r['reason']}" for r in rows) or "?"
        )
    if reason == "partial_group":
        # (a member outside the selection's scope, an eval episode, takes the group out too)
        lost = {
            e: picked.why[e]
            for e in picked.groups.get(group, [])
            if picked.why.get(e) not in (*WAITING, "partial_group", "group_expired", "group_waiting")
        }
        return SENTENCES[reason].format(group=group, lost=_partial(lost) or "a member")
    if reason == "group_expired":
        wait = ck.metrics["selection"].get("max_group_wait_s")
        return SENTENCES[reason].format(group=group, wait=f"{wait:g}" if wait is not None else "?", when=when)
    if reason == "group_waiting":
        members = picked.members.get(group, [])
        open_ = [e for e in members if picked.why.get(e) in ("incomplete", "no_reward")]
        size = picked.sizes.get(group)
        parts = [f"{_partial({e: picked.why[e] for e in open_})}"] if open_ else []
        if size and len(members) < size:
            parts.append(f"{len(members)} of {size} attempts in the table")
        return SENTENCES[reason].format(group=group, waiting="; ".join(parts) or "?")
    return SENTENCES.get(reason, reason).format(judge=judge, group=group)


# ------------------------------------------------------------------ the route


def _sample(row: dict[str, Any]) -> TrainingSamplePublic:
    mask, logprobs = row["response_mask"] or [], row["response_logprobs"] or []
    own = [lp for m, lp in zip(mask, logprobs, strict=False) if m]
    return TrainingSamplePublic(
        sequence=row["sequence"],
        start=row["start"],
        first_seq=row["first_seq"],
        last_seq=row["last_seq"],
        num_calls=row["num_calls"],
        problem=row["problem"],
        group_id=row["group_id"],
        policy_version=row["policy_version"],
        temperature=row["temperature"],
        top_p=row["top_p"],
        top_k=row["top_k"],
        prompt_tokens=len(row["prompt_ids"] or []),
        response_tokens=len(row["response_ids"] or []),
        loss_tokens=row["num_loss_tokens"],
        mean_logprob=sum(own) / len(own) if own else None,
    )


def _summary(verdicts: list[TrainingVerdictPublic]) -> tuple[str | None, str]:
    trained = [v.checkpoint_id for v in verdicts if v.trained]
    if trained:
        return None, f"trained on by {', '.join(trained)}"
    if not verdicts:
        return "not_read_yet", "no checkpoint's snapshot holds it yet"
    for v in verdicts:  # newest first: the newest checkpoint that decided for itself
        if v.trained is False and v.reason != "read_by_parent":
            return v.reason, f"{v.checkpoint_id}: {v.detail}"
    unknown = sorted({str(v.reason) for v in verdicts if v.trained is None})
    which = (
        "the checkpoint that read it"
        if len(verdicts) == 1
        else f"the {len(verdicts)} checkpoints that read it"
    )
    return None, f"whether {which} trained on it cannot be told ({', '.join(unknown)})"


@router.get(
    "/{episode_id}/training",
    responses={404: {"description": "No such episode."}},
)
def episode_training(
    reader: ReaderDep, episode_id: Annotated[str, Path(description="The episode.")]
) -> EpisodeTrainingPublic:
    """What the learner made of an episode: its sample rows, and each checkpoint that read it.

    Each checkpoint whose pinned snapshot held the episode is answered with ``trained`` (true, false,
    or null where the lake cannot say) and, when not, the learner's reason (``reward_error``,
    ``partial_group``, ``group_waiting``, ``read_by_parent``, a sample's ``problem``,
    ``zero_advantage_group``, ...); when trained, the reward its judge version gave and the
    group-relative advantage. The checkpoints' datasets are recomputed from their lineage (the table
    versions, judge and selection they recorded) by the learner's rules.
    """
    episodes = reader.snapshot("episodes")
    if not filter_rows(episodes.table, {"episode_id": episode_id}).num_rows:
        raise NotFoundError(f"no episode {episode_id!r} in the episodes table")
    samples = reader.rows_where("samples", "episode_id", episode_id)
    checkpoints = reader.snapshot("checkpoints")
    retractions = reader.snapshot("retractions")
    by_id = {r["checkpoint_id"]: Lineage.of(r) for r in checkpoints.table.to_pylist()}
    ordered = sorted(by_id.values(), key=lambda c: (c.row["created_at"], c.id), reverse=True)
    verdicts: list[TrainingVerdictPublic] = []
    before = 0
    for ck in ordered:
        if not ck.row["lake_uri"] or "episodes" not in ck.versions:
            before += 1  # trained on data from outside the lake (a warm start)
            continue
        v = checkpoint_verdict(reader, ck, by_id, episode_id)
        if v is None:
            before += 1
            continue
        verdicts.append(
            TrainingVerdictPublic(
                checkpoint_id=ck.id,
                parent_id=ck.row["parent_id"],
                created_at=ck.row["created_at"],
                judge_name=ck.row["judge_name"],
                judge_version=ck.row["judge_version"],
                table_versions=ck.versions,
                trained=v.trained,
                reason=v.reason,
                detail=v.detail,
                reward=v.reward,
                advantage=v.advantage,
                sequences=v.sequences,
                group_rewards=v.group,
            )
        )
    reason, detail = _summary(verdicts)
    episode = filter_rows(episodes.table, {"episode_id": episode_id}).to_pylist()[0]
    judges = {
        (r["judge_name"], r["judge_version"])
        for r in filter_rows(reader.snapshot("rewards").table, {"episode_id": episode_id}).to_pylist()
    }
    hits = {
        r["retraction_id"]: r
        for j in judges | {("", None)}
        for r in retractions_hitting(retractions.table.to_pylist(), episode, j)
    }
    return EpisodeTrainingPublic(
        versions=versions_of(episodes, samples, checkpoints, retractions),
        episode_id=episode_id,
        samples=[_sample(r) for r in samples.table.sort_by("sequence").to_pylist()],
        trained_by=[v.checkpoint_id for v in verdicts if v.trained],
        reason=reason,
        detail=detail,
        checkpoints=verdicts,
        checkpoints_not_holding=before,
        retractions=[
            RetractionHitPublic(
                retraction_id=r["retraction_id"],
                scope=r["scope"],
                target=r["target"],
                reason=r["reason"],
                retracted_by=r["retracted_by"],
                retracted_at=r["retracted_at"],
            )
            for r in sorted(hits.values(), key=lambda r: r["retracted_at"])
        ],  # fmt: skip
    )
