"""Training samples read from the Delta tables at pinned versions.

(lake, Delta versions, judge name + version, filters) -> one sample per model
call: the prompt and completion token ids, the behaviour log-probabilities
recorded when the completion was sampled, and the reward the judge gave the
episode, with the episode's group for group-relative advantages. The
``model_call`` rows of ``steps`` are joined with ``episodes`` and ``rewards``
through Arrow at exactly the pinned versions, so rows appended later are not
seen. ``infra_error`` and ``aborted`` episodes never reach the loss.
Incremental: given the versions a parent checkpoint was trained on, only
episodes that appeared since are read.
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

from lake import Lake, consistent_versions
from learners.tokenizer import CharTokenizer

TABLES_READ = ("episodes", "steps", "rewards")
LEARNABLE = ("success", "failure", "truncated")
"""Episode statuses a learner may learn from (never ``infra_error`` or ``aborted``)."""


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


@dataclass
class Sample:
    """One model call of one episode, with its episode's reward."""

    episode_id: str
    group_id: str
    task_id: str
    policy_version: str
    reward: float
    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour_logprobs: list[float]
    temperature: float = 1.0
    """The temperature the completion was sampled at (the learner scores it at the same one)."""
    task_family: str = ""
    messages: list[dict[str, Any]] | None = None
    """The prompt messages the server saw (when the event holds them inline)."""
    completion: str = ""
    """The completion text."""


@dataclass
class SampleSet:
    """Samples and exactly what they were read from."""

    samples: list[Sample]
    table_versions: dict[str, int]
    judge_name: str
    judge_version: str | None
    episodes: int
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def mean_reward(self) -> float:
        """Mean reward over the samples' episodes."""
        per_ep = {s.episode_id: s.reward for s in self.samples}
        return float(np.mean(list(per_ep.values()))) if per_ep else 0.0


def pinned_versions(lake: str, versions: dict[str, int] | None = None) -> dict[str, int]:
    """The versions of the tables read: those given, else the newest that hold the same Kafka offsets.

    A batch commits ``episodes``, ``steps`` and ``rewards`` one after another; a
    read while it commits must not pair one batch's episodes with the previous
    batch's rewards (:func:`lake.consistent_versions`).
    """
    if versions is not None and all(n in versions for n in TABLES_READ):
        return {n: int(versions[n]) for n in TABLES_READ}
    found = consistent_versions(Lake(lake), TABLES_READ)
    return {**found, **{n: int(v) for n, v in (versions or {}).items() if n in TABLES_READ}}


@dataclass(frozen=True)
class _Sampling:
    temperature: float
    problem: str | None
    """Why the learner cannot score this episode's samples under their sampling distribution."""


def _sampling(payload: dict[str, Any]) -> _Sampling:
    """The transform the episode's completions were drawn with, from its ``episode_started`` payload."""
    sp = payload.get("sampling") or {}
    extra = sp.get("extra") or {}
    t = sp.get("temperature")
    if extra.get("greedy"):
        return _Sampling(1.0, "greedy_decoding")  # a deterministic choice has no behaviour probability
    if t is not None and not t > 0:
        return _Sampling(1.0, "greedy_decoding")  # temperature 0 is greedy decoding
    top_p, top_k = sp.get("top_p"), extra.get("top_k")
    if (top_p is not None and top_p < 1.0) or (top_k is not None and top_k > 0):
        return _Sampling(1.0, "unsupported_sampling")  # truncated distributions are not rescored here
    return _Sampling(float(t) if t is not None else 1.0, None)


def _trainable(
    episodes: pa.Table,
    rewards: pa.Table,
    spec: DatasetSpec,
    judge_version: str | None,
    excluded: dict[str, str] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """The episodes a learner may train on in one snapshot, with their scores.

    An episode is trainable when it passes the spec's filters, ended with a
    learnable status, is complete, and the chosen judge version scored it with
    a verdict other than ``error``; a group is trainable only whole: while one
    of its episodes is not (yet) complete or scored, or fewer episodes than the
    group size its rollout recorded are in the table, the group waits.
    """
    why: dict[str, str] = excluded if excluded is not None else {}
    cols = ("episode_id", "task_id", "task_family", "policy_version", "group_id", "status", "completeness",
            "group_size")  # fmt: skip
    ep_table = episodes.select(list(cols))  # read in the table's schema: old rows have no group size
    rows = [dict(zip(cols, r, strict=True)) for r in zip(*(ep_table.column(c).to_pylist() for c in cols))]
    scored: dict[str, tuple[float, str]] = {}
    r = rewards.filter(pc.equal(rewards.column("judge_name"), spec.judge_name))
    for eid, version, value, verdict in zip(
        r.column("episode_id").to_pylist(), r.column("judge_version").to_pylist(),
        r.column("score").to_pylist(), r.column("verdict").to_pylist(), strict=True,
    ):  # fmt: skip
        if version == judge_version:
            scored[eid] = (float(value), verdict)
    keep: dict[str, dict[str, Any]] = {}
    score: dict[str, float] = {}
    pending_groups: set[str] = set()
    members: Counter[str] = Counter()
    sizes: dict[str, int] = {}
    for ep in rows:
        if spec.task_ids is not None and ep["task_id"] not in spec.task_ids:
            continue
        if spec.families is not None and ep["task_family"] not in spec.families:
            continue
        if spec.policy_versions is not None and ep["policy_version"] not in spec.policy_versions:
            continue
        group = ep["group_id"] or ep["episode_id"]
        members[group] += 1
        if ep.get("group_size"):
            sizes[group] = max(sizes.get(group, 0), int(ep["group_size"]))
        if ep["completeness"] == "gap":
            why[ep["episode_id"]] = "gap"  # events lost for good (quarantined): never whole, never waited for
            continue
        if ep["completeness"] != "complete" or ep["status"] is None or ep["status"] == "open":
            pending_groups.add(group)  # the group is trained once it is whole
            why[ep["episode_id"]] = "incomplete"
            continue
        if ep["status"] not in LEARNABLE:
            why[ep["episode_id"]] = f"status:{ep['status']}"
            continue
        if ep["episode_id"] not in scored:
            pending_groups.add(group)
            why[ep["episode_id"]] = "no_reward"
            continue
        value, verdict = scored[ep["episode_id"]]
        if verdict == "error":
            why[ep["episode_id"]] = "reward_error"  # the judge failed: no signal about the policy
            continue
        keep[ep["episode_id"]] = ep
        score[ep["episode_id"]] = value
    # a group whose recorded size is not reached yet has members that have not even started
    pending_groups |= {g for g, n in sizes.items() if members[g] < n}
    for eid in [e for e, ep in keep.items() if (ep["group_id"] or e) in pending_groups]:
        why[eid] = "group_waiting"
        del keep[eid], score[eid]
    return keep, score


def load_samples(spec: DatasetSpec) -> SampleSet:
    """Read the samples the spec describes at pinned versions (one consistent snapshot).

    With ``spec.since`` (the versions the parent checkpoint was trained on),
    exactly the episodes that became trainable since are read: an episode that
    was open, unscored or waiting for its group then is trained on now, once.
    Every exclusion is counted by reason in ``skipped``.
    """
    lk = Lake(spec.lake)
    versions = pinned_versions(spec.lake, spec.versions)
    tables = {name: lk.read(name, version=versions[name]) for name in TABLES_READ}
    skipped: Counter[str] = Counter()

    judge_version = spec.judge_version
    rewards = tables["rewards"].filter(pc.equal(tables["rewards"].column("judge_name"), spec.judge_name))
    if judge_version is None and rewards.num_rows:
        # the version most of the rewards of the episodes in scope carry
        eps = tables["episodes"]
        scope = {
            e
            for e, t, f, pv in zip(
                eps.column("episode_id").to_pylist(),
                eps.column("task_id").to_pylist(),
                eps.column("task_family").to_pylist(),
                eps.column("policy_version").to_pylist(),
                strict=True,
            )  # fmt: skip
            if (spec.task_ids is None or t in spec.task_ids)
            and (spec.families is None or f in spec.families)
            and (spec.policy_versions is None or pv in spec.policy_versions)
        }
        in_scope = [
            v
            for e, v in zip(
                rewards.column("episode_id").to_pylist(),
                rewards.column("judge_version").to_pylist(),
                strict=True,
            )
            if e in scope
        ]
        judge_version = Counter(in_scope).most_common(1)[0][0] if in_scope else None
    excluded: dict[str, str] = {}
    keep, score = _trainable(tables["episodes"], tables["rewards"], spec, judge_version, excluded)
    if spec.since and "episodes" in spec.since:
        before_eps = lk.read("episodes", version=spec.since["episodes"])
        before_rw = (
            lk.read("rewards", version=spec.since["rewards"])
            if "rewards" in spec.since
            else tables["rewards"].slice(0, 0)
        )
        excluded_before: dict[str, str] = {}
        trained, _ = _trainable(
            before_eps, before_rw, spec, spec.since_judge_version or judge_version, excluded_before
        )
        for eid in list(keep):
            if eid in trained:
                del keep[eid], score[eid]
        # counted once: an episode excluded for the same reason at the parent's snapshot was counted there
        excluded = {e: r for e, r in excluded.items() if e not in trained and excluded_before.get(e) != r}
    skipped.update(excluded.values())

    steps = tables["steps"].filter(
        pc.is_in(tables["steps"].column("type"), pa.array(["episode_started", "model_call"]))
    )
    steps = steps.filter(pc.is_in(steps.column("episode_id"), pa.array(list(keep), type=pa.string())))
    sampling: dict[str, _Sampling] = {}
    calls: list[tuple[str, bytes]] = []
    for eid, kind, raw in zip(
        steps.column("episode_id").to_pylist(), steps.column("type").to_pylist(),
        steps.column("payload").to_pylist(), strict=True,
    ):  # fmt: skip
        if kind == "episode_started":
            sampling[eid] = _sampling(orjson.loads(raw))
        else:
            calls.append((eid, raw))
    samples: list[Sample] = []
    # column-wise, and orjson for the payloads: this loop is the learner's read path
    for eid, raw in calls:
        how = sampling.get(eid, _Sampling(1.0, None))
        if how.problem is not None:
            skipped[how.problem] += 1
            continue
        payload = orjson.loads(raw)
        prompt, completion, logprobs = (
            payload.get("prompt_token_ids"),
            payload.get("completion_token_ids"),
            payload.get("completion_logprobs"),
        )
        if not prompt or not completion or not logprobs or len(completion) != len(logprobs):
            skipped["no_token_data"] += 1
            continue
        ep = keep[eid]
        samples.append(
            Sample(
                episode_id=eid,
                group_id=ep["group_id"] or eid,
                task_id=ep["task_id"],
                policy_version=ep["policy_version"] or "",
                reward=score[eid],
                prompt_ids=prompt,
                completion_ids=completion,
                behaviour_logprobs=logprobs,
                temperature=how.temperature,
                task_family=ep["task_family"] or "",
                messages=payload.get("messages"),
                completion=payload.get("completion") or "",
            )
        )
    samples.sort(key=lambda s: (s.group_id, s.episode_id))
    return SampleSet(
        samples, versions, spec.judge_name, judge_version, len({s.episode_id for s in samples}), skipped
    )


def episode_advantages(samples: Sequence[Sample]) -> np.ndarray:
    """Group-relative advantage per sample, with the group statistics taken over *episodes*.

    An episode with several model calls is one member of its group (its reward
    counts once in the group's mean and std); each of its samples gets the
    episode's advantage.
    """
    if not samples:
        return np.zeros(0, dtype=np.float64)
    order: dict[str, int] = {}
    rewards: list[float] = []
    groups: list[str] = []
    for s in samples:
        if s.episode_id not in order:
            order[s.episode_id] = len(order)
            rewards.append(s.reward)
            groups.append(s.group_id)
    index: dict[str, int] = {}
    per_episode = group_advantages_np(
        np.array(rewards, dtype=np.float64), np.array([index.setdefault(g, len(index)) for g in groups])
    )
    return np.array([per_episode[order[s.episode_id]] for s in samples], dtype=np.float64)


def collate(samples: Sequence[Sample], advantages: np.ndarray, max_len: int) -> dict[str, np.ndarray]:
    """Right-padded arrays of a batch (``input_ids``, ``completion_mask``, ``old_logp``, ``advantages``, ...).

    ``old_logp[t]`` is the behaviour log-probability of ``input_ids[t]`` (completion positions only);
    ``temperature[i]`` the one row ``i`` was sampled at.
    """
    rows = [(s.prompt_ids + s.completion_ids)[:max_len] for s in samples]
    width = max(len(r) for r in rows)
    n = len(samples)
    ids = np.full((n, width), CharTokenizer.PAD, dtype=np.int64)
    mask = np.zeros((n, width), dtype=np.float32)
    old = np.zeros((n, width), dtype=np.float32)
    for i, (s, row) in enumerate(zip(samples, rows)):
        ids[i, : len(row)] = row
        start = len(s.prompt_ids)
        end = len(row)
        if end > start:
            mask[i, start:end] = 1.0
            old[i, start:end] = s.behaviour_logprobs[: end - start]
    return {
        "input_ids": ids,
        "completion_mask": mask,
        "old_logp": old,
        "advantages": advantages.astype(np.float32),
        "temperature": np.array([s.temperature for s in samples], dtype=np.float32),
    }


class Batches:
    """Minibatches of a sample set with group-relative advantages, as numpy arrays (JAX) or tensors (torch).

    Advantages are computed over the whole set (every member of a group is in
    it). The whole set is padded into contiguous arrays once, so a minibatch is
    a gather of rows, not a Python loop over samples.
    """

    def __init__(self, samples: Sequence[Sample], *, batch_size: int, max_len: int, seed: int = 0) -> None:
        self.samples = list(samples)
        self.batch_size = batch_size
        self.max_len = max_len
        self.rng = np.random.default_rng(seed)
        self.advantages = episode_advantages(self.samples)
        self.arrays = collate(self.samples, self.advantages, max_len) if self.samples else {}
        # per row, the width actually used, so a minibatch is trimmed to its longest row
        self.widths = (
            (self.arrays["input_ids"] != CharTokenizer.PAD).sum(axis=1) if self.samples else np.zeros(0)
        )

    def __len__(self) -> int:
        return (len(self.samples) + self.batch_size - 1) // self.batch_size

    def add_column(self, name: str, values: np.ndarray) -> None:
        """A per-row array (``[N]`` or ``[N, T]`` in the padded layout) that minibatches carry from now on."""
        self.arrays[name] = values

    def ordered(self) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Every row once, in order, as ``(row indices, minibatch)`` (for passes that fill a column)."""
        for i in range(0, len(self.samples), self.batch_size):
            idx = np.arange(i, min(i + self.batch_size, len(self.samples)))
            yield idx, self._rows(idx)

    def _rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        width = int(self.widths[idx].max())
        return {k: (v[idx, :width] if v.ndim == 2 else v[idx]) for k, v in self.arrays.items()}

    def numpy(self) -> Iterator[dict[str, np.ndarray]]:
        """One epoch of minibatches as numpy arrays."""
        order = self.rng.permutation(len(self.samples))
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
                return len(outer.samples)

            def __getitem__(self, i: int) -> int:
                return i

        return _DS()

    def collate_fn(self, indices: Sequence[int]) -> dict[str, Any]:
        """DataLoader ``collate_fn``: sample indices -> a batch of tensors."""
        import torch

        return {
            k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in self._rows(np.asarray(indices)).items()
        }


def group_advantages_np(rewards: np.ndarray, groups: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """(r - mean_g) / (std_g + eps) per group, population std; constant groups get 0 (numpy)."""
    adv = np.zeros_like(rewards, dtype=np.float64)
    for g in np.unique(groups):
        sel = groups == g
        r = rewards[sel]
        if np.all(r == r[0]):
            continue
        adv[sel] = (r - r.mean()) / (r.std() + eps)
    return adv
