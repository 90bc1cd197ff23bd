"""Training samples read from the Delta tables at pinned versions.

(lake, Delta versions, judge name + version, filters) -> one sample per training
sequence: a row of the gold ``samples`` table (typed token ids, loss mask and the
behaviour log-probabilities the sampler recorded; one sequence per episode whose
model calls continue one token history, :mod:`fold.samples`) with the reward
the chosen judge version gave its episode and the episode's group for group-relative
advantages. ``episodes`` and ``rewards`` (small) select the trainable episodes;
``samples`` is then read with column and filter pushdown, at exactly the pinned
versions, so rows appended later are not seen and no JSON payload is decoded.
``infra_error`` and ``aborted`` episodes never reach the loss. The selection rules are
:func:`lake.selection.trainable`, shared with the query API that explains them. Incremental: given
the versions a parent checkpoint was trained on, only episodes that became
trainable since are read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from lake import Lake, consistent_versions, sql_literal
from lake.selection import (
    EPISODE_COLUMNS,
    REWARD_COLUMNS,
    TABLES_READ,
    Picked,
    Retracted,
    group_advantages_np,
    trainable,
)
from learners.metrics import record_excluded
from learners.retractions import read_retracted
from learners.tokenizer import CharTokenizer

TRAIN_COLUMNS = (
    "episode_id", "sequence", "start", "num_calls", "problem", "temperature", "prompt_ids", "response_ids",
    "response_mask", "response_logprobs",
)  # fmt: skip
"""The ``samples`` columns a learner reads (the messages are read only for exports)."""
MESSAGE_COLUMNS = ("prompt_messages", "response_messages")
DEFAULT_GROUP_WAIT_S = 3600.0
"""How long a group waits for its last members after its first one ended (log time), by default."""


@dataclass(frozen=True)
class DatasetSpec:
    """What to read."""

    lake: str
    """Lake root (the tables are its sub-directories)."""
    judge_name: str
    """Rewards of this judge."""
    judge_version: str | None = None
    """And this version (``None``: the version most of the rewards have, pinned when read)."""
    versions: dict[str, int] | None = None
    """Delta version per table (``None``: the current ones, pinned when read)."""
    since: dict[str, int] | None = None
    """Versions already trained on: only episodes that became trainable after them are read."""
    since_judge_version: str | None = None
    """The judge version the ``since`` snapshot was trained with (default: this read's)."""
    task_ids: frozenset[str] | None = None
    """Only these tasks (e.g. the training split)."""
    families: frozenset[str] | None = None
    policy_versions: frozenset[str] | None = None
    """Only episodes run by these policy versions (``None``: any, off-policy data included)."""
    max_group_wait_s: float | None = DEFAULT_GROUP_WAIT_S
    """A group still not whole this many seconds (log time: the snapshot's newest episode time)
    after its first member ended is dropped for good and counted as ``group_expired`` (``None``:
    wait for ever). Log time, not the reader's clock, so a pinned read always selects the same."""
    with_messages: bool = False
    """Also read each sequence's chat messages (exports); a learner needs only the tokens."""
    storage_options: dict[str, str] | None = None
    """delta-rs's options for a lake on an object store (``s3://``: endpoint, keys, region)."""


@dataclass
class Sample:
    """One training sequence of one episode, with its episode's reward."""

    episode_id: str
    group_id: str
    task_id: str
    policy_version: str
    reward: float
    prompt_ids: list[int]
    completion_ids: list[int]
    """Every token after the prompt: the policy's completions and, in a multi-turn sequence, the
    tokens the environment added between them (``completion_mask`` 0)."""
    behaviour_logprobs: list[float]
    """One per ``completion_ids`` entry: the sampler's log-probability (0 where masked)."""
    temperature: float = 1.0
    """The temperature the completion was sampled at (the learner scores it at the same one)."""
    task_family: str = ""
    messages: list[dict[str, Any]] | None = None
    """The prompt messages the server saw (when the event holds them inline)."""
    completion: str = ""
    """The completion text (the assistant turns' texts, joined)."""
    completion_mask: list[int] | None = None
    """1 where the policy generated the token, 0 where the environment did (``None``: all 1)."""
    response_messages: list[dict[str, Any]] | None = None
    """What followed the prompt, as chat messages (assistant replies, tool results)."""
    sequence: int = 0
    """Which sequence of its episode this is (a broken token history starts a new one)."""


SAMPLE_SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()), ("sequence", pa.int32()), ("group_id", pa.string()),
        ("task_id", pa.string()), ("task_family", pa.string()), ("policy_version", pa.string()),
        ("reward", pa.float64()), ("temperature", pa.float64()), ("prompt_ids", pa.list_(pa.int32())),
        ("response_ids", pa.list_(pa.int32())), ("response_mask", pa.list_(pa.int8())),
        ("response_logprobs", pa.list_(pa.float32())), ("prompt_messages", pa.string()),
        ("response_messages", pa.string()),
    ]
)  # fmt: skip
"""The in-memory layout of a sample set: one row per sample, tokens as Arrow list columns."""


def samples_table(samples: Sequence[Sample]) -> pa.Table:
    """:class:`Sample` objects in the columnar layout (:data:`SAMPLE_SCHEMA`).

    Raises:
        LearnerConfigError: a sample whose log-probs or mask do not have one entry per token.
    """
    from learners.errors import LearnerConfigError

    for s in samples:
        if len(s.behaviour_logprobs) != len(s.completion_ids) or (
            s.completion_mask is not None and len(s.completion_mask) != len(s.completion_ids)
        ):
            raise LearnerConfigError(
                f"sample {s.episode_id}/{s.sequence}: {len(s.completion_ids)} completion tokens but "
                f"{len(s.behaviour_logprobs)} log-probs and a mask of "
                f"{len(s.completion_mask) if s.completion_mask is not None else 'all'}"
            )
    return pa.Table.from_pylist(
        [
            {
                "episode_id": s.episode_id, "sequence": s.sequence, "group_id": s.group_id,
                "task_id": s.task_id, "task_family": s.task_family, "policy_version": s.policy_version,
                "reward": s.reward,
                "temperature": s.temperature, "prompt_ids": s.prompt_ids, "response_ids": s.completion_ids,
                "response_mask": s.completion_mask or [1] * len(s.completion_ids),
                "response_logprobs": s.behaviour_logprobs,
                "prompt_messages": None if s.messages is None else orjson.dumps(s.messages).decode(),
                "response_messages": None if s.response_messages is None
                else orjson.dumps(s.response_messages).decode(),
            }
            for s in samples
        ],
        schema=SAMPLE_SCHEMA,
    )  # fmt: skip


def _sample_objects(table: pa.Table) -> list[Sample]:
    cols = {c: table.column(c).to_pylist() for c in table.column_names}
    out = []
    for i in range(table.num_rows):
        replies = orjson.loads(cols["response_messages"][i]) if cols["response_messages"][i] else None
        mask = cols["response_mask"][i]
        out.append(
            Sample(
                episode_id=cols["episode_id"][i], group_id=cols["group_id"][i],
                task_id=cols["task_id"][i] or "", policy_version=cols["policy_version"][i] or "",
                reward=cols["reward"][i],
                prompt_ids=cols["prompt_ids"][i], completion_ids=cols["response_ids"][i],
                behaviour_logprobs=cols["response_logprobs"][i], temperature=cols["temperature"][i],
                task_family=cols["task_family"][i] or "",
                messages=orjson.loads(cols["prompt_messages"][i]) if cols["prompt_messages"][i] else None,
                completion="".join(
                    str(m.get("content") or "") for m in replies or [] if m.get("role") == "assistant"
                ),
                completion_mask=None if all(mask) else mask, response_messages=replies,
                sequence=cols["sequence"][i],
            )
        )  # fmt: skip
    return out


@dataclass
class SampleSet:
    """Samples (columnar: :data:`SAMPLE_SCHEMA`) and exactly what they were read from."""

    table: pa.Table
    """One row per sample, sorted by group, episode and sequence."""
    table_versions: dict[str, int]
    judge_name: str
    judge_version: str | None
    skipped: Counter[str] = field(default_factory=Counter)
    """What was left out, by reason: episodes for the episode-level reasons (``reward_error``,
    ``status:...``, ``gap``, ``no_samples``, ``group_*``, and ``partial_group`` for the other members of
    a group one of them left), sample rows for the row-level ones (a sample's ``problem``,
    ``policy_lag``, ``token_out_of_vocab``, and ``partial_group`` for the rows their groups lost)."""
    token_history: Counter[str] = field(default_factory=Counter)
    """How the model calls of the samples' episodes joined up: ``merged_calls`` (calls that
    continued a sequence) and ``history_mismatch`` (sequences started where a history broke)."""
    _objects: list[Sample] | None = field(default=None, repr=False)

    @classmethod
    def from_samples(cls, samples: Sequence[Sample], **kw: Any) -> SampleSet:
        """A sample set of in-memory samples (``kw``: the other fields)."""
        return cls(
            samples_table(samples), **{"table_versions": {}, "judge_name": "", "judge_version": None, **kw}
        )

    def __len__(self) -> int:
        return int(self.table.num_rows)

    @property
    def samples(self) -> list[Sample]:
        """The samples as :class:`Sample` objects (built on first use; the learner reads :attr:`table`)."""
        if self._objects is None:
            self._objects = _sample_objects(self.table)
        return self._objects

    @property
    def episodes(self) -> int:
        """Distinct episodes among the samples."""
        return len(pc.unique(self.table.column("episode_id"))) if self.table.num_rows else 0

    @property
    def mean_reward(self) -> float:
        """Mean reward over the samples' episodes."""
        if not self.table.num_rows:
            return 0.0
        per_ep = self.table.group_by("episode_id").aggregate([("reward", "max")])
        return float(pc.mean(per_ep.column("reward_max")).as_py())

    def keep(self, mask: np.ndarray | Sequence[bool], reason: str) -> int:
        """Keep the rows where ``mask`` is true, count the others in ``skipped[reason]``; return how many.

        Groups stay whole: the rows of a group that lost a member here go too, counted as
        ``partial_group`` (a baseline over the survivors would not be the group's).
        """
        keep = np.asarray(mask, dtype=bool)
        dropped = len(self) - int(keep.sum())
        if dropped:
            self.skipped[reason] += dropped
            self.table, partial = _whole_groups(self.table, keep)
            if partial:
                self.skipped["partial_group"] += partial
            record_excluded({reason: dropped, "partial_group": partial})
            self._objects = None
        return dropped


def _whole_groups(table: pa.Table, keep: np.ndarray) -> tuple[pa.Table, int]:
    """``table`` without the rows ``keep`` drops and without the rest of their groups.

    Returns the table and how many rows went only because their group lost one.
    """
    lost = pc.unique(pc.filter(table.column("group_id"), pa.array(~keep)))
    whole = pc.invert(pc.is_in(table.column("group_id"), value_set=lost))
    survivors = pa.array(keep) if not len(lost) else pc.and_(pa.array(keep), whole)
    partial = int(pc.sum(pc.and_(pa.array(keep), pc.invert(whole))).as_py() or 0) if len(lost) else 0
    return table.filter(survivors), partial


def pinned_versions(
    lake: str, versions: dict[str, int] | None = None, storage_options: dict[str, str] | None = None
) -> dict[str, int]:
    """The versions of the tables read: those given, else the newest that hold the same Kafka offsets.

    A batch commits ``episodes``, ``rewards`` and ``samples`` one after another; a
    read while it commits must not pair one batch's episodes with the previous
    batch's rewards (:func:`lake.consistent_versions`).
    """
    if versions is not None and all(n in versions for n in TABLES_READ):
        return {n: int(versions[n]) for n in TABLES_READ}
    found = consistent_versions(Lake(lake, storage_options), TABLES_READ)
    return {**found, **{n: int(v) for n, v in (versions or {}).items() if n in TABLES_READ}}


def _picked(
    episodes: pa.Table,
    rewards: pa.Table,
    spec: DatasetSpec,
    judge_version: str | None,
    retracted: Retracted,
    eval_tasks: frozenset[str],
) -> Picked:
    """The spec's episode selection of one snapshot (:func:`lake.selection.trainable`)."""
    return trainable(
        episodes, rewards, judge_name=spec.judge_name, judge_version=judge_version, task_ids=spec.task_ids,
        families=spec.families, policy_versions=spec.policy_versions, max_group_wait_s=spec.max_group_wait_s,
        retracted=retracted, eval_tasks=eval_tasks,
    )  # fmt: skip


def _most_common_judge_version(
    episodes: pa.Table, rewards: pa.Table, spec: DatasetSpec, eval_tasks: frozenset[str] = frozenset()
) -> str | None:
    """The version most of the rewards of the trainable-by-scope episodes carry (evaluations left out)."""
    if not rewards.num_rows:
        return None
    scope = {
        e
        for e, t, f, pv, src in zip(
            episodes.column("episode_id").to_pylist(),
            episodes.column("task_id").to_pylist(),
            episodes.column("task_family").to_pylist(),
            episodes.column("policy_version").to_pylist(),
            episodes.column("source").to_pylist(),
            strict=True,
        )  # fmt: skip
        if src != "eval"
        and t not in eval_tasks
        and (spec.task_ids is None or t in spec.task_ids)
        and (spec.families is None or f in spec.families)
        and (spec.policy_versions is None or pv in spec.policy_versions)
    }
    in_scope = [
        v
        for e, v in zip(
            rewards.column("episode_id").to_pylist(), rewards.column("judge_version").to_pylist(), strict=True
        )  # fmt: skip
        if e in scope
    ]
    return Counter(in_scope).most_common(1)[0][0] if in_scope else None


def _eval_tasks(lk: Lake, version: int | None) -> frozenset[str]:
    """The tasks the ``tasks`` table (at ``version``; none: no table read) puts in the eval split."""
    from lake.splits import recorded_splits

    if version is None:
        return frozenset()
    return frozenset(t for t, s in recorded_splits(lk, version).items() if s == "eval")


def _rewards(lk: Lake, version: int, judge_name: str) -> pa.Table:
    """The judge's rewards at ``version``, only the columns selection reads."""
    return lk.read(
        "rewards", version=version, where=f"judge_name = {sql_literal(judge_name)}", columns=REWARD_COLUMNS
    )


def load_samples(spec: DatasetSpec) -> SampleSet:
    """Read the samples the spec describes at pinned versions (one consistent snapshot).

    With ``spec.since`` (the versions the parent checkpoint was trained on),
    exactly the episodes that became trainable since are read: an episode that
    was open, unscored or waiting for its group then is trained on now, once.
    Every exclusion is counted by reason in ``skipped``.
    """
    lk = Lake(spec.lake, spec.storage_options)
    versions = pinned_versions(spec.lake, spec.versions, spec.storage_options)
    episodes = lk.read("episodes", version=versions["episodes"], columns=EPISODE_COLUMNS)
    rewards = _rewards(lk, versions["rewards"], spec.judge_name)
    skipped: Counter[str] = Counter()
    # the retractions and the task splits in the snapshot: pinned with the rest (a lineage from
    # before they were read has none)
    # (a pinned read takes them from its versions; an unpinned one reads the lake's once)
    current = spec.versions if spec.versions is not None else lk.versions()
    ret_version = current.get("retractions")
    if ret_version is not None:
        versions = {**versions, "retractions": int(ret_version)}
    retracted = read_retracted(lk, ret_version)
    tasks_version = current.get("tasks")
    if tasks_version is not None:
        versions = {**versions, "tasks": int(tasks_version)}
    eval_tasks = _eval_tasks(lk, tasks_version)
    judge_version = spec.judge_version or _most_common_judge_version(episodes, rewards, spec, eval_tasks)
    now = _picked(episodes, rewards, spec, judge_version, retracted, eval_tasks)
    keep, score, excluded = now.keep, now.score, now.why
    if spec.since and "episodes" in spec.since:
        before_eps = lk.read("episodes", version=spec.since["episodes"], columns=EPISODE_COLUMNS)
        before_rw = (
            _rewards(lk, spec.since["rewards"], spec.judge_name)
            if "rewards" in spec.since
            else rewards.slice(0, 0)
        )
        before = _picked(
            before_eps, before_rw, spec, spec.since_judge_version or judge_version,
            read_retracted(lk, spec.since.get("retractions")),
            _eval_tasks(lk, spec.since.get("tasks")),
        )  # fmt: skip
        trained, excluded_before = before.keep, before.why
        for eid in list(keep):
            # trained then, or dropped for good then (an expired group stays dropped)
            if eid in trained or excluded_before.get(eid) == "group_expired":
                del keep[eid], score[eid]
        # counted once: an episode excluded for the same reason at the parent's snapshot was counted there
        excluded = {e: r for e, r in excluded.items() if e not in trained and excluded_before.get(e) != r}
    skipped.update(excluded.values())

    columns = TRAIN_COLUMNS + (MESSAGE_COLUMNS if spec.with_messages else ())
    rows = lk.read_episodes_rows("samples", sorted(keep), version=versions["samples"], columns=columns)
    table, token_history = _trainable_rows(rows, keep, score, skipped)
    record_excluded(skipped)
    return SampleSet(table, versions, spec.judge_name, judge_version, skipped, token_history)


def _trainable_rows(
    rows: pa.Table, keep: dict[str, dict[str, Any]], score: dict[str, float], skipped: Counter[str]
) -> tuple[pa.Table, Counter[str]]:
    """``samples`` rows of the kept episodes -> the sample set's table (columnar; no row loop over tokens)."""
    history: Counter[str] = Counter()
    history["history_mismatch"] = int(pc.sum(pc.equal(rows.column("start"), "history_mismatch")).as_py() or 0)
    problems = rows.column("problem")
    for item in (
        pc.value_counts(problems.drop_null()).to_pylist() if problems.null_count < len(problems) else []
    ):
        skipped[item["values"]] += item["counts"]
    bad_episodes = set(pc.unique(pc.filter(rows.column("episode_id"), pc.is_valid(problems))).to_pylist())
    # no model call (a scripted episode), or a lake whose samples are not yet replayed
    without = keep.keys() - set(pc.unique(rows.column("episode_id")).to_pylist())
    if without:
        skipped["no_samples"] += len(without)
        bad_episodes |= without
    lost_groups = {keep[e]["group_id"] or e for e in bad_episodes if e in keep}
    rows = rows.filter(pc.is_null(problems))
    history["merged_calls"] = int(pc.sum(rows.column("num_calls")).as_py() or 0) - rows.num_rows
    history = +history  # only what happened
    ids = sorted(keep)
    at = pc.index_in(rows.column("episode_id"), value_set=pa.array(ids, type=pa.string()))

    def per_episode(values: list[Any], kind: pa.DataType) -> pa.Array:
        return pa.array(values, type=kind).take(at)

    eps = [keep[e] for e in ids]
    n = rows.num_rows
    table = pa.table(
        {
            "episode_id": rows.column("episode_id"),
            "sequence": rows.column("sequence"),
            "group_id": per_episode([ep["group_id"] or e for e, ep in zip(ids, eps, strict=True)], pa.string()),  # noqa: E501
            "task_id": per_episode([ep["task_id"] for ep in eps], pa.string()),
            "task_family": per_episode([ep["task_family"] or "" for ep in eps], pa.string()),
            "policy_version": per_episode([ep["policy_version"] or "" for ep in eps], pa.string()),
            "reward": per_episode([score[e] for e in ids], pa.float64()),
            "temperature": rows.column("temperature"),
            "prompt_ids": rows.column("prompt_ids"),
            "response_ids": rows.column("response_ids"),
            "response_mask": rows.column("response_mask"),
            "response_logprobs": rows.column("response_logprobs"),
            "prompt_messages": rows.column("prompt_messages") if "prompt_messages" in rows.column_names
            else pa.nulls(n, pa.string()),
            "response_messages": rows.column("response_messages") if "response_messages" in rows.column_names
            else pa.nulls(n, pa.string()),
        },
        schema=SAMPLE_SCHEMA,
    )  # fmt: skip
    if lost_groups:  # a group with an untrainable row is not trained on (its baseline would be a part's)
        in_lost = pc.is_in(table.column("group_id"), value_set=pa.array(sorted(lost_groups), pa.string()))
        partial = int(pc.sum(in_lost).as_py() or 0)
        if partial:
            skipped["partial_group"] += partial
            table = table.filter(pc.invert(in_lost))
    order = [("group_id", "ascending"), ("episode_id", "ascending"), ("sequence", "ascending")]
    return table.sort_by(order), history


def episode_advantages(samples: Sequence[Sample] | pa.Table, *, scale: bool = True) -> np.ndarray:
    """Group-relative advantage per sample, with the group statistics taken over *episodes*.

    An episode with several sequences is one member of its group (its reward
    counts once in the group's mean and std); each of its samples gets the
    episode's advantage.
    """
    table = samples if isinstance(samples, pa.Table) else samples_table(samples)
    if not table.num_rows:
        return np.zeros(0, dtype=np.float64)
    episode = pc.dictionary_encode(table.column("episode_id")).combine_chunks()
    ep_index = episode.indices.to_numpy(zero_copy_only=False)
    n_eps = len(episode.dictionary)
    first = np.full(n_eps, -1, dtype=np.int64)
    first[ep_index[::-1]] = np.arange(len(ep_index))[::-1]  # each episode's first row
    rewards = table.column("reward").to_numpy()[first]
    group = (
        pc.dictionary_encode(table.column("group_id")).combine_chunks().indices.to_numpy(zero_copy_only=False)
    )
    per_episode = group_advantages_np(rewards.astype(np.float64), group[first], scale=scale)
    return np.asarray(per_episode[ep_index], dtype=np.float64)


def _list_parts(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A list column as (flat values, lengths), whatever its chunking or slicing."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = arr.offsets.to_numpy()
    return arr.flatten().to_numpy(zero_copy_only=False), np.diff(offsets)


def collate(table: pa.Table, advantages: np.ndarray, max_len: int) -> dict[str, np.ndarray]:
    """Right-padded arrays of a sample table (``input_ids``, ``completion_mask``, ``old_logp``, ...).

    ``completion_mask[t]`` is 1 where ``input_ids[t]`` is a token the policy generated (a
    multi-turn sequence's tool tokens are 0); ``old_logp[t]`` its behaviour log-probability;
    ``temperature[i]`` the one row ``i`` was sampled at. Rows longer than ``max_len`` are cut.
    """
    n = table.num_rows
    prompt, p_len = _list_parts(table.column("prompt_ids"))
    response, r_len = _list_parts(table.column("response_ids"))
    mask_v, _ = _list_parts(table.column("response_mask"))
    logp_v, _ = _list_parts(table.column("response_logprobs"))
    width = int(min(max_len, (p_len + r_len).max()))
    ids = np.full((n, width), CharTokenizer.PAD, dtype=np.int64)
    mask = np.zeros((n, width), dtype=np.float32)
    old = np.zeros((n, width), dtype=np.float32)

    def positions(lengths: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = np.repeat(np.arange(n), lengths)
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        cols = np.arange(int(lengths.sum())) - starts + np.repeat(shift, lengths)
        fits = cols < width
        return rows[fits], cols[fits], fits

    r, c, fits = positions(p_len, np.zeros(n, dtype=np.int64))
    ids[r, c] = prompt[fits]
    r, c, fits = positions(r_len, p_len)
    ids[r, c] = response[fits]
    mask[r, c] = mask_v[fits]
    old[r, c] = logp_v[fits] * mask_v[fits]
    return {
        "input_ids": ids,
        "completion_mask": mask,
        "old_logp": old,
        "advantages": advantages.astype(np.float32),
        "temperature": table.column("temperature").to_numpy().astype(np.float32),
    }


class Batches:
    """Minibatches of a sample set with group-relative advantages, as numpy arrays (JAX) or tensors (torch).

    Advantages are computed over the whole set (every member of a group is in
    it). The whole set is padded into contiguous arrays once, from its Arrow
    columns without a loop over samples, so a minibatch is a gather of rows.
    """

    def __init__(
        self,
        samples: Sequence[Sample] | SampleSet | pa.Table,
        *,
        batch_size: int,
        max_len: int,
        seed: int = 0,
        scale_advantages: bool = True,
    ) -> None:
        if isinstance(samples, SampleSet):
            self.table = samples.table
        elif isinstance(samples, pa.Table):
            self.table = samples
        else:
            self.table = samples_table(samples)
        self.n: int = int(self.table.num_rows)
        self.batch_size = batch_size
        self.max_len = max_len
        self.rng = np.random.default_rng(seed)
        self.advantages = episode_advantages(self.table, scale=scale_advantages)
        self.arrays = collate(self.table, self.advantages, max_len) if self.n else {}
        # per row, the width actually used, so a minibatch is trimmed to its longest row (by length:
        # PAD is an ordinary token id in many vocabularies)
        full = (
            _list_parts(self.table.column("prompt_ids"))[1]
            + _list_parts(self.table.column("response_ids"))[1]
            if self.n
            else np.zeros(0, dtype=np.int64)
        )
        self.widths = np.minimum(full, max_len)
        self.truncated = int((full > max_len).sum())
        """Rows cut at ``max_len`` (their tail is not trained on)."""

    def __len__(self) -> int:
        return (self.n + self.batch_size - 1) // self.batch_size

    def add_column(self, name: str, values: np.ndarray) -> None:
        """A per-row array (``[N]`` or ``[N, T]`` in the padded layout) that minibatches carry from now on."""
        self.arrays[name] = values

    def ordered(self) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Every row once, in order, as ``(row indices, minibatch)`` (for passes that fill a column)."""
        for i in range(0, self.n, self.batch_size):
            idx = np.arange(i, min(i + self.batch_size, self.n))
            yield idx, self._rows(idx)

    def _rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        width = int(self.widths[idx].max())
        return {k: (v[idx, :width] if v.ndim == 2 else v[idx]) for k, v in self.arrays.items()}

    def numpy(self) -> Iterator[dict[str, np.ndarray]]:
        """One epoch of minibatches as numpy arrays."""
        order = self.rng.permutation(self.n)
        for i in range(0, len(order), self.batch_size):
            yield self._rows(order[i : i + self.batch_size])

    def torch(self, device: Any = "cpu") -> Iterator[dict[str, Any]]:
        """One epoch of minibatches as torch tensors on ``device``."""
        import torch

        for batch in self.numpy():
            yield {k: torch.from_numpy(v).to(device, non_blocking=True) for k, v in batch.items()}

    def torch_dataset(self) -> Any:
        """A map-style torch ``Dataset`` of sample indices; use :meth:`collate_fn` in the DataLoader."""
        import torch.utils.data

        outer = self

        class _DS(torch.utils.data.Dataset):  # type: ignore[type-arg]
            def __len__(self) -> int:
                return outer.n

            def __getitem__(self, i: int) -> int:
                return i

        return _DS()

    def collate_fn(self, indices: Sequence[int]) -> dict[str, Any]:
        """DataLoader ``collate_fn``: sample indices -> a batch of tensors."""
        import torch

        return {
            k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in self._rows(np.asarray(indices)).items()
        }


def max_token_ids(table: pa.Table) -> np.ndarray:
    """Per row, the largest token id of its prompt and response (-1 for a row with none)."""
    out = np.full(table.num_rows, -1, dtype=np.int64)
    for name in ("prompt_ids", "response_ids"):
        values, lengths = _list_parts(table.column(name))
        np.maximum.at(out, np.repeat(np.arange(table.num_rows), lengths), values.astype(np.int64))
    return out


def truncated(data: SampleSet, max_len: int) -> int:
    """Samples longer than ``max_len`` tokens (a learner trains on their first ``max_len`` only)."""
    if not len(data):
        return 0
    full = _list_parts(data.table.column("prompt_ids"))[1] + _list_parts(data.table.column("response_ids"))[1]
    return int((full > max_len).sum())
