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
    """Versions already trained on: only episodes absent from ``episodes`` at that version are read."""
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


def load_samples(spec: DatasetSpec) -> SampleSet:
    """Read the samples the spec describes at pinned versions."""
    lk = Lake(spec.lake)
    versions = pinned_versions(spec.lake, spec.versions)
    tables = {name: lk.read(name, version=versions[name]) for name in TABLES_READ}
    skipped: Counter[str] = Counter()

    cols = ("episode_id", "task_id", "task_family", "policy_version", "group_id", "status", "completeness")
    ep_table = tables["episodes"].select(list(cols))
    episodes = {
        row[0]: dict(zip(cols, row, strict=True))
        for row in zip(*(ep_table.column(c).to_pylist() for c in cols), strict=True)
    }
    seen: set[str] = set()
    if spec.since and "episodes" in spec.since:
        old = lk.read("episodes", version=spec.since["episodes"])
        seen = set(old.column("episode_id").to_pylist())
    keep: dict[str, dict[str, Any]] = {}
    for eid, ep in episodes.items():
        if eid in seen:
            continue
        if spec.task_ids is not None and ep["task_id"] not in spec.task_ids:
            continue
        if spec.families is not None and ep["task_family"] not in spec.families:
            continue
        if spec.policy_versions is not None and ep["policy_version"] not in spec.policy_versions:
            continue
        if ep["status"] not in LEARNABLE:
            skipped[f"status:{ep['status']}"] += 1
            continue
        if ep["completeness"] != "complete":
            skipped["incomplete"] += 1
            continue
        keep[eid] = ep

    rewards = tables["rewards"].filter(pc.equal(tables["rewards"].column("judge_name"), spec.judge_name))
    judge_version = spec.judge_version
    if judge_version is None and rewards.num_rows:
        in_scope = [v for e, v in zip(rewards.column("episode_id").to_pylist(),
                                      rewards.column("judge_version").to_pylist()) if e in keep]  # fmt: skip
        judge_version = Counter(in_scope).most_common(1)[0][0] if in_scope else None
    score: dict[str, float] = {}
    for eid, version, value in zip(
        rewards.column("episode_id").to_pylist(),
        rewards.column("judge_version").to_pylist(),
        rewards.column("score").to_pylist(),
        strict=True,
    ):
        if version == judge_version and eid in keep:
            score[eid] = float(value)

    steps = tables["steps"].filter(pc.equal(tables["steps"].column("type"), "model_call"))
    steps = steps.filter(pc.is_in(steps.column("episode_id"), pa.array(list(keep), type=pa.string())))
    samples: list[Sample] = []
    # column-wise, and orjson for the payloads: this loop is the learner's read path
    for eid, raw in zip(steps.column("episode_id").to_pylist(), steps.column("payload").to_pylist()):
        if eid not in score:
            skipped["no_reward"] += 1
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
            )
        )
    samples.sort(key=lambda s: (s.group_id, s.episode_id))
    return SampleSet(
        samples, versions, spec.judge_name, judge_version, len({s.episode_id for s in samples}), skipped
    )


def group_indices(samples: Sequence[Sample]) -> np.ndarray:
    """Integer group index per sample (same ``group_id`` -> same index)."""
    ids: dict[str, int] = {}
    return np.array([ids.setdefault(s.group_id, len(ids)) for s in samples], dtype=np.int64)


def collate(samples: Sequence[Sample], advantages: np.ndarray, max_len: int) -> dict[str, np.ndarray]:
    """Right-padded arrays of a batch: ``input_ids``, ``completion_mask``, ``old_logp``, ``advantages``.

    ``old_logp[t]`` is the behaviour log-probability of ``input_ids[t]`` (completion positions only).
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
        rewards = np.array([s.reward for s in self.samples], dtype=np.float64)
        self.advantages = group_advantages_np(rewards, group_indices(self.samples))
        self.arrays = collate(self.samples, self.advantages, max_len) if self.samples else {}
        # per row, the width actually used, so a minibatch is trimmed to its longest row
        self.widths = (
            (self.arrays["input_ids"] != CharTokenizer.PAD).sum(axis=1) if self.samples else np.zeros(0)
        )

    def __len__(self) -> int:
        return (len(self.samples) + self.batch_size - 1) // self.batch_size

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
