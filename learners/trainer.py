"""Training: the policy-gradient learner (torch or JAX) and a supervised warm start.

One training step reads the samples that are new since the parent checkpoint
from the lake at pinned versions, computes group-relative advantages, and
minimises the clipped importance-weighted policy-gradient loss (with the
behaviour log-probabilities recorded in the events, so data sampled by older
policy versions is weighted, not ignored), optionally with a KL penalty to a
reference policy. The result is a checkpoint whose lineage names the Delta
versions, judge and parent it came from. Metrics per step go to
``metrics.jsonl`` in the checkpoint directory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from learners.checkpoints import (
    CheckpointInfo,
    Lineage,
    OptimizerState,
    load_checkpoint,
    load_optimizer_state,
    save_checkpoint,
)
from learners.config import ModelConfig
from learners.dataset import (
    Batches,
    DatasetSpec,
    Sample,
    SampleSet,
    load_samples,
    max_token_ids,
    truncated,
)
from learners.errors import LearnerConfigError
from learners.metrics import record_policy_lag, record_step, timed_steps
from learners.tokenizer import CharTokenizer


@dataclass
class TrainArgs:
    """Arguments of one learner step (cleanrl-style: one documented field each)."""

    lake: str
    """Lake root to read the dataset from."""
    checkpoint_root: str
    """Where new checkpoints are written."""
    judge_name: str
    """Rewards of this judge are the reward signal."""
    judge_version: str | None = None
    """Pinned judge version (``None``: the one most rewards carry)."""
    parent: str | None = None
    """Checkpoint directory to start from (also the KL reference)."""
    backend: str = "torch"
    """``torch`` or ``jax``."""
    policy_id: str = "tinylm"
    """Name of the policy the checkpoints belong to."""
    task_ids: Sequence[str] | None = None
    """Train only on these tasks (``None``: all)."""
    families: Sequence[str] | None = None
    """Train only on tasks of these families (``None``: all)."""
    incremental: bool = True
    """Read only episodes new since the parent's table versions."""
    epochs: int = 2
    """Passes over the samples."""
    batch_size: int = 64
    """Samples per minibatch (one optimiser step each)."""
    micro_batch_size: int | None = None
    """Samples per forward/backward pass; a minibatch's gradients are accumulated over its
    micro-batches, each weighted by its share of the minibatch's loss tokens, so the step is the
    minibatch's token-mean loss whatever the split (``None``: the whole minibatch at once). Each
    micro-batch is cut to its own longest sequence."""
    lr: float = 3e-4
    """Adam learning rate."""
    lr_warmup_steps: int = 0
    """Optimiser steps over which the learning rate rises linearly to ``lr``, counted across
    iterations through the carried optimiser state (0: none). A fresh Adam's first steps move
    every parameter by about ``lr`` whatever its gradient's size (its moments start at 0), which
    can undo a warm start before the advantages have said anything."""
    clip_eps: float = 0.2
    """PPO-style ratio clip (around the proximal policy: the parameters at the start of this step)."""
    dual_clip: float | None = 3.0
    """Dual-clip bound for negative advantages (Ye et al. 2020), so a stale sample's loss stays bounded."""
    clip_eps_high: float | None = None
    """Clip-higher (DAPO): the ratio's upper bound is ``1 + clip_eps_high`` (``None``: ``clip_eps``)."""
    scale_advantages: bool = True
    """Divide each group's centred rewards by the group's std (GRPO); ``False``: centred only (Dr. GRPO,
    no difficulty bias from the std)."""
    max_group_wait_s: float | None = 3600.0
    """A group not whole this many seconds (log time) after its first member ended is dropped and
    counted as ``group_expired`` (``None``: it waits for ever); see :class:`DatasetSpec`."""
    max_policy_lag: int | None = None
    """Train only on samples at most this many policy versions behind the parent (``None``: any);
    a sample whose policy is not in the parent's lineage has an unknown lag and is then left out."""
    drop_zero_advantage_groups: bool = True
    """Leave out groups whose episodes all got the same reward (their advantages are all zero, so
    they only dilute a minibatch; DAPO's dynamic sampling); counted as ``zero_advantage_group``."""
    tis_cap: float = 2.0
    """Truncation of the rollout-correction weight ``pi_prox / pi_behaviour`` per token (token-level
    truncated IS, as verl's rollout correction; the decoupled objective of AReaL)."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference policy (0: none)."""
    kl_reference: str | None = None
    """A checkpoint held fixed as the KL reference across steps (e.g. the supervised start), distinct
    from the proximal policy; ``None``: the parent (the parameters this step starts from)."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    seed: int = 0
    """Shuffling and initialisation seed."""
    device: str = "auto"
    """``auto`` (GPU when there is one), ``cpu`` or ``cuda`` (torch)."""
    model: dict[str, int] = field(default_factory=dict)
    """Model configuration when there is no parent."""
    hf_model: str | None = None
    """A local Hugging Face causal LM directory (``save_pretrained``) to start from when there is no
    parent (torch only; nothing is downloaded); its checkpoints are Hugging Face directories again."""
    resume_optimizer: bool = True
    """Continue the parent's Adam moments and step count when it saved them (one optimiser across
    iterations, as one long training run has); ``False`` starts them afresh."""


@dataclass
class TrainResult:
    """What a learner step produced."""

    checkpoint: CheckpointInfo | None
    """``None`` when there was nothing new to learn from."""
    samples: int
    mean_reward: float
    metrics: list[dict[str, float]]
    seconds: float


def _load_start(
    args: TrainArgs,
) -> tuple[ModelConfig, dict[str, np.ndarray] | None, CheckpointInfo | None, Path | None]:
    """The model a step starts from: (sizes, weights, parent, Hugging Face directory)."""
    if args.parent:
        info, cfg, weights = load_checkpoint(args.parent)
        # an hf checkpoint's weights are its hf/ directory's, or its fp32 master weights when it has them
        return cfg, (weights if info.hf_dir is None or weights else None), info, info.hf_dir
    if args.hf_model:
        from learners.hf_model import hf_config

        return ModelConfig.from_dict(hf_config(args.hf_model)), None, None, Path(args.hf_model)
    return ModelConfig.from_dict(args.model) if args.model else ModelConfig(), None, None, None


def rollout_correction(
    prox_logp: np.ndarray, behaviour_logp: np.ndarray, mask: np.ndarray, cap: float
) -> tuple[np.ndarray, dict[str, float]]:
    """Truncated importance weights ``min(exp(prox - behaviour), cap)`` per token, and the mismatch.

    ``prox_logp`` is the learner's own log-probability of each sampled token with the parameters
    the step starts from (under the same sampling transform), ``behaviour_logp`` what the sampler
    recorded. When the two agree (one model, one transform, one precision) every weight is 1 and
    the objective is plain PPO against the behaviour policy; when they do not (bf16 training
    against fp32 sampling, another inference engine, a lagging policy), the weights correct the
    gradient and the mismatch is reported.

    Returns:
        ``(weights [N, T], metrics)``: ``logp_mismatch_mean`` / ``logp_mismatch_max`` (absolute
        difference over completion tokens), ``tis_weight_mean`` and ``tis_truncated_frac``.
    """
    on = mask != 0
    diff = np.where(on, prox_logp - behaviour_logp, 0.0)
    raw = np.exp(np.clip(diff, -50.0, 50.0))
    weights = np.where(on, np.minimum(raw, cap), 0.0).astype(np.float32)
    n = max(int(on.sum()), 1)
    metrics = {
        "logp_mismatch_mean": float(np.abs(diff).sum() / n),
        "logp_mismatch_max": float(np.abs(diff).max()) if on.any() else 0.0,
        "tis_weight_mean": float(weights.sum() / n),
        "tis_truncated_frac": float(((raw > cap) & on).sum() / n),
    }
    return weights, metrics


def warmup_lr(args: TrainArgs, steps_done: int) -> float:
    """The learning rate of the optimiser's next step: ``lr``, ramped up over ``lr_warmup_steps``."""
    if args.lr_warmup_steps <= 0:
        return args.lr
    return args.lr * min(1.0, (steps_done + 1) / args.lr_warmup_steps)


def policy_lags(policy_versions: Sequence[str], lineage: Sequence[str]) -> list[int | None]:
    """How many policy versions behind the newest each sample's policy is (``None``: not in the lineage).

    Args:
        policy_versions: the policy version (checkpoint id) each sample was drawn by.
        lineage: checkpoint ids from the newest (the parent of this step) back to the first.
    """
    position = {c: i for i, c in enumerate(lineage)}
    return [position.get(v) for v in policy_versions]


def _reference_weights(path: str) -> tuple[dict[str, np.ndarray], Path | None]:
    """A fixed KL reference checkpoint's weights (and its Hugging Face directory, if it is one)."""
    try:
        info, _, weights = load_checkpoint(path)
    except (OSError, ValueError, KeyError) as exc:
        raise LearnerConfigError(f"the KL reference {path} is not a readable checkpoint: {exc}") from exc
    return weights, info.hf_dir


def _lake_uri(lake: str) -> str:
    return lake if "://" in lake else str(Path(lake).resolve())


def selection_of(args: TrainArgs) -> dict[str, Any]:
    """What a step selects to train on, beside its judge (recorded in the lineage's ``selection``)."""
    return {
        "lake": _lake_uri(args.lake),
        "tasks": sorted(args.task_ids) if args.task_ids is not None else None,
        "families": sorted(args.families) if args.families is not None else None,
        "max_group_wait_s": args.max_group_wait_s,
        "max_policy_lag": args.max_policy_lag,
    }


def _check_selection(args: TrainArgs, parent: CheckpointInfo) -> None:
    """Refuse an incremental read whose lake, judge or selection differs from the parent's.

    It reads what became trainable since the parent's snapshot: with another selection, episodes
    outside the parent's would look trained already and be skipped for good; with another judge,
    the parent's snapshot would be replayed with that judge's rewards (at the parent's version), so
    what the parent trained on would not be what the replay says. (Another version of the same judge
    is fine: the replay uses the parent's.)
    """
    if parent.lineage.lake_uri and parent.lineage.lake_uri != _lake_uri(args.lake):
        raise LearnerConfigError(
            f"the parent {parent.checkpoint_id} was trained on the lake {parent.lineage.lake_uri}, this step "
            f"reads {_lake_uri(args.lake)}: an incremental read needs the parent's lake (or --full)"
        )
    if parent.lineage.judge_name and parent.lineage.judge_name != args.judge_name:
        raise LearnerConfigError(
            f"the parent {parent.checkpoint_id} was trained on the rewards of the judge "
            f"{parent.lineage.judge_name!r}, this step reads {args.judge_name!r}: an incremental read would "
            "take what the parent trained on from the other judge's rewards and train episodes twice or "
            "skip them; keep the parent's judge, or train with --full"
        )
    before = parent.lineage.metrics.get("selection")
    if not isinstance(before, dict):
        return  # a parent from before selections were recorded
    now = selection_of(args)
    differs = [f"{k} {before.get(k)!r} -> {now[k]!r}" for k in ("tasks", "families", "max_group_wait_s",
               "max_policy_lag") if before.get(k) != now[k]]  # fmt: skip
    if differs:
        raise LearnerConfigError(
            f"this step selects other data than its parent {parent.checkpoint_id} ({'; '.join(differs)}): "
            "an incremental read would skip episodes that look trained already; keep the parent's selection, "
            "or train with --full"
        )


def _parent_lineage(lake: str, parent: CheckpointInfo | None) -> list[str]:
    if parent is None:
        return []
    from lake import LakeError
    from learners.checkpoints import lineage_chain
    from learners.errors import CheckpointNotFoundError

    try:
        return [r["checkpoint_id"] for r in lineage_chain(lake, parent.checkpoint_id)]
    except (CheckpointNotFoundError, LakeError):
        return [parent.checkpoint_id]  # not folded yet: only the parent itself is known


def _drop_zero_advantage(data: SampleSet) -> tuple[int, int]:
    """Drop every group whose episodes all have one reward; return (groups, groups dropped)."""
    if not len(data):
        return 0, 0
    spread = data.table.group_by("group_id").aggregate([("reward", "min"), ("reward", "max")])
    flat = pc.equal(spread.column("reward_min"), spread.column("reward_max"))
    constant = spread.column("group_id").filter(flat)
    if len(constant):
        data.keep(pc.invert(pc.is_in(data.table.column("group_id"), value_set=constant)).to_numpy(
            zero_copy_only=False), "zero_advantage_group")  # fmt: skip
    return spread.num_rows, len(constant)


def _write_metrics(path: Path, rows: list[dict[str, float]]) -> None:
    with open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


# ------------------------------------------------------------------- torch


def _torch_step(
    cfg: ModelConfig,
    weights: dict[str, np.ndarray] | None,
    batches: Batches,
    args: TrainArgs,
    on_step: Callable[[dict[str, float]], None] | None,
    opt_state: OptimizerState | None = None,
    hf_path: Path | None = None,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]], OptimizerState]:
    import torch

    from learners.losses_torch import policy_loss
    from learners.torch_model import TinyLM, autocast, select_device, sequence_logprobs

    torch.manual_seed(args.seed)
    device = select_device(args.device)

    def build() -> torch.nn.Module:
        if hf_path is not None:
            from learners.hf_model import HFPolicyModel, load_causal_lm

            # fp32 master weights whatever the checkpoint's dtype (bf16 for most released models):
            # the optimiser's small updates are not rounded away, and numpy reads them as they are
            return HFPolicyModel(load_causal_lm(hf_path, device=device, dtype=torch.float32))
        return TinyLM(cfg).to(device)

    model = build()
    if weights is not None:
        model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
    ref: torch.nn.Module | None = None
    if args.kl_coef > 0 and args.kl_reference is not None:
        ref_weights, ref_hf = _reference_weights(args.kl_reference)
        if ref_hf is not None:
            from learners.hf_model import HFPolicyModel, load_causal_lm

            ref = HFPolicyModel(load_causal_lm(ref_hf, device=device, dtype=torch.float32))
        else:
            ref = TinyLM(cfg).to(device)
        if ref_weights:
            ref.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in ref_weights.items()})
        ref.eval()
    elif args.kl_coef > 0 and (weights is not None or hf_path is not None):
        ref = build()
        ref.load_state_dict(model.state_dict())
        ref.eval()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    named = dict(model.named_parameters())
    if opt_state is not None and (
        set(opt_state.m) != set(named)
        or any(opt_state.m[k].shape != tuple(p.shape) for k, p in named.items())
    ):
        raise LearnerConfigError(
            "the parent's optimizer.npz does not match its model's parameters; "
            "train with resume_optimizer=False"
        )
    if opt_state is not None:
        for name, param in named.items():
            opt.state[param] = {
                "step": torch.tensor(float(opt_state.step)),
                "exp_avg": torch.from_numpy(np.array(opt_state.m[name])).to(device),
                "exp_avg_sq": torch.from_numpy(np.array(opt_state.v[name])).to(device),
            }
    # the proximal policy: this step's starting parameters, scored as the training pass scores
    prox = np.zeros_like(batches.arrays["old_logp"])
    with torch.no_grad(), autocast(device):
        for idx, nb in batches.ordered():
            for lo, _, mb in micro_batches(nb, args.micro_batch_size):
                tb = {k: torch.from_numpy(v).to(device) for k, v in mb.items()}
                logp = sequence_logprobs(model, tb["input_ids"], tb["completion_mask"], tb["temperature"])
                prox[idx[lo : lo + logp.shape[0]], : logp.shape[1]] = logp.float().cpu().numpy()
    is_w, _ = rollout_correction(
        prox, batches.arrays["old_logp"], batches.arrays["completion_mask"], args.tis_cap
    )
    batches.add_column("prox_logp", prox)
    batches.add_column("is_weights", is_w)
    model.train()
    rows: list[dict[str, float]] = []
    step = 0
    for epoch in range(args.epochs):
        for batch in timed_steps(batches.torch(device)):
            opt.zero_grad()
            parts = list(micro_batches(batch, args.micro_batch_size))
            loss_sum, sums = 0.0, dict.fromkeys(LOSS_METRICS, 0.0)
            for _, w, mb in parts:
                with autocast(device):
                    new_logp = sequence_logprobs(
                        model, mb["input_ids"], mb["completion_mask"], mb["temperature"]
                    )
                    ref_logp = None
                    if ref is not None:
                        with torch.no_grad():
                            ref_logp = sequence_logprobs(
                                ref, mb["input_ids"], mb["completion_mask"], mb["temperature"]
                            )
                loss, m = policy_loss(
                    new_logp.float(),
                    mb["prox_logp"],
                    mb["advantages"],
                    mb["completion_mask"],
                    clip_eps=args.clip_eps,
                    clip_eps_high=args.clip_eps_high,
                    ref_logp=None if ref_logp is None else ref_logp.float(),
                    kl_coef=args.kl_coef,
                    is_weights=mb["is_weights"],
                    dual_clip=args.dual_clip,
                )
                (loss * w).backward()  # type: ignore[no-untyped-call]
                loss_sum += float(loss.detach()) * w
                for k in sums:
                    sums[k] += float(m[k]) * w
            loss = torch.tensor(loss_sum)
            metrics: dict[str, Any] = {**sums, **_batch_mismatch(batch), "micro_batches": len(parts)}
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            lr = warmup_lr(args, (opt_state.step if opt_state else 0) + step)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            _record(rows, on_step, step, epoch, loss, {**metrics, "lr": lr})
            step += 1
    state = OptimizerState(
        step=(opt_state.step if opt_state else 0) + step,
        m={n: opt.state[p]["exp_avg"].detach().cpu().numpy() for n, p in named.items() if p in opt.state},
        v={n: opt.state[p]["exp_avg_sq"].detach().cpu().numpy() for n, p in named.items() if p in opt.state},
    )
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}, rows, state


LOSS_METRICS = ("pg_loss", "kl", "clip_frac", "ratio_mean")
"""The policy loss's token-mean metrics, summed over micro-batches by their share of the tokens."""


def micro_batches(batch: Mapping[str, Any], size: int | None) -> Iterator[tuple[int, float, dict[str, Any]]]:
    """A minibatch (numpy arrays or tensors, rows first) as ``(first row, share, micro-batch)``.

    Micro-batches have ``size`` rows (``None``: one, the whole minibatch). ``share`` is the
    micro-batch's part of the minibatch's loss tokens (equal parts when it has none), so the sum of
    ``share x`` each micro-batch's token-mean loss is the minibatch's token-mean loss. Each
    micro-batch's ``[rows, T]`` columns are cut after its last completion token (sequences are
    right-padded and attention is causal, so the positions after it change nothing it scores).

    Raises:
        LearnerConfigError: ``size`` is below 1.
    """
    n = int(batch["input_ids"].shape[0])
    width = int(batch["input_ids"].shape[1])
    step = n if size is None or size >= n else size
    if step <= 0:
        raise LearnerConfigError(f"micro_batch_size must be a positive number of samples, got {size}")
    mask = batch["completion_mask"]
    mask = np.asarray(mask.cpu() if hasattr(mask, "cpu") else mask) != 0
    total = int(mask.sum())
    parts = -(-n // step)
    for lo in range(0, n, step):
        cols = np.flatnonzero(mask[lo : lo + step].any(axis=0))
        end = int(cols[-1]) + 1 if len(cols) else 1
        share = int(mask[lo : lo + step].sum()) / total if total else 1.0 / parts
        yield (
            lo,
            share,
            {
                k: (v[lo : lo + step, :end] if v.ndim == 2 and v.shape[1] == width else v[lo : lo + step])
                for k, v in batch.items()
            },
        )


def _batch_mismatch(batch: Mapping[str, Any]) -> dict[str, float]:
    """The rollout-vs-learner log-prob mismatch of one minibatch (numpy arrays or torch tensors)."""

    def host(x: Any) -> np.ndarray:
        return np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)

    _, m = rollout_correction(
        host(batch["prox_logp"]), host(batch["old_logp"]), host(batch["completion_mask"]), float("inf")
    )
    mask = host(batch["completion_mask"])
    # -E[log pi_behaviour] over the sampled tokens: a Monte-Carlo estimate of the policy's entropy
    entropy = float(-(host(batch["old_logp"]) * mask).sum() / max(mask.sum(), 1.0))
    return {"logp_mismatch_mean": m["logp_mismatch_mean"], "logp_mismatch_max": m["logp_mismatch_max"],
            "entropy_estimate": entropy}  # fmt: skip


def _record(
    rows: list[dict[str, float]],
    on_step: Callable[[dict[str, float]], None] | None,
    step: int,
    epoch: int,
    loss: Any,
    metrics: Mapping[str, Any],
) -> None:
    """One learner step's metrics row (torch tensors and JAX arrays alike), kept and reported."""
    row = {
        "step": step,
        "epoch": epoch,
        "loss": float(loss.detach()) if hasattr(loss, "detach") else float(loss),
        **{k: float(v) for k, v in metrics.items()},
    }
    rows.append(row)
    record_step(row)
    if on_step:
        on_step(row)


# --------------------------------------------------------------------- jax


class _Adam:
    """Adam over a dict of arrays (enough for the JAX learner, no optax needed)."""

    def __init__(
        self, params: dict[str, Any], lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
    ):
        import jax.numpy as jnp

        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.m = {k: jnp.zeros_like(v) for k, v in params.items()}
        self.v = {k: jnp.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def update(self, params: dict[str, Any], grads: dict[str, Any]) -> dict[str, Any]:
        import jax.numpy as jnp

        self.t += 1
        out = {}
        for k, g in grads.items():
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * g * g
            mhat = self.m[k] / (1 - self.b1**self.t)
            vhat = self.v[k] / (1 - self.b2**self.t)
            out[k] = params[k] - self.lr * mhat / (jnp.sqrt(vhat) + self.eps)
        return out


def _clip_grads(grads: dict[str, Any], max_norm: float) -> dict[str, Any]:
    import jax.numpy as jnp

    total = jnp.sqrt(sum(jnp.sum(g * g) for g in grads.values()))
    scale = jnp.minimum(1.0, max_norm / (total + 1e-6))
    return {k: g * scale for k, g in grads.items()}


def _jax_step(
    cfg: ModelConfig,
    weights: dict[str, np.ndarray] | None,
    batches: Batches,
    args: TrainArgs,
    on_step: Callable[[dict[str, float]], None] | None,
    opt_state: OptimizerState | None = None,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]], OptimizerState]:
    import jax
    import jax.numpy as jnp

    from learners.jax_model import init_params, params_from_numpy, params_to_numpy, sequence_logprobs
    from learners.losses_jax import policy_loss

    params = params_from_numpy(weights) if weights is not None else init_params(cfg, args.seed)
    ref_params = params if args.kl_coef > 0 and weights is not None else None
    if args.kl_coef > 0 and args.kl_reference is not None:
        ref_weights, _ = _reference_weights(args.kl_reference)
        ref_params = params_from_numpy(ref_weights)

    def loss_fn(p: dict[str, Any], batch: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        temp = batch["temperature"]
        new_logp = sequence_logprobs(p, batch["input_ids"], batch["completion_mask"], cfg, temp)
        ref_logp = None
        if ref_params is not None:
            ref_logp = jax.lax.stop_gradient(
                sequence_logprobs(ref_params, batch["input_ids"], batch["completion_mask"], cfg, temp)
            )
        return policy_loss(
            new_logp, batch["prox_logp"], batch["advantages"], batch["completion_mask"],
            clip_eps=args.clip_eps, clip_eps_high=args.clip_eps_high, ref_logp=ref_logp, kl_coef=args.kl_coef,
            is_weights=batch["is_weights"], dual_clip=args.dual_clip,
        )  # fmt: skip

    prox = np.zeros_like(batches.arrays["old_logp"])
    for idx, nb in batches.ordered():
        for lo, _, mb in micro_batches(nb, args.micro_batch_size):
            logp = sequence_logprobs(
                params, jnp.asarray(mb["input_ids"]), jnp.asarray(mb["completion_mask"]), cfg,
                jnp.asarray(mb["temperature"]),
            )  # fmt: skip
            prox[idx[lo : lo + logp.shape[0]], : logp.shape[1]] = np.asarray(logp)
    is_w, _ = rollout_correction(
        prox, batches.arrays["old_logp"], batches.arrays["completion_mask"], args.tis_cap
    )
    batches.add_column("prox_logp", prox)
    batches.add_column("is_weights", is_w)

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    opt = _Adam(params, args.lr)
    if opt_state is not None:
        opt.t = opt_state.step
        opt.m = {k: jnp.asarray(opt_state.m[k]) for k in params}
        opt.v = {k: jnp.asarray(opt_state.v[k]) for k in params}
    rows: list[dict[str, float]] = []
    step = 0
    for epoch in range(args.epochs):
        for nb in timed_steps(batches.numpy()):
            parts = list(micro_batches(nb, args.micro_batch_size))
            grads: dict[str, Any] = {}
            loss_sum, sums = 0.0, dict.fromkeys(LOSS_METRICS, 0.0)
            for _, w, mb in parts:
                (loss, m), g = grad_fn(params, {k: jnp.asarray(v) for k, v in mb.items()})
                grads = {k: w * v + grads[k] if k in grads else w * v for k, v in g.items()}
                loss_sum += float(loss) * w
                for k in sums:
                    sums[k] += float(m[k]) * w
            opt.lr = warmup_lr(args, opt.t)
            params = opt.update(params, _clip_grads(grads, args.max_grad_norm))
            metrics = {**sums, **_batch_mismatch(nb), "micro_batches": len(parts), "lr": opt.lr}
            _record(rows, on_step, step, epoch, loss_sum, metrics)
            step += 1
    state = OptimizerState(opt.t, params_to_numpy(opt.m), params_to_numpy(opt.v))
    return params_to_numpy(params), rows, state


# -------------------------------------------------------------------- steps


def train(
    args: TrainArgs,
    *,
    on_step: Callable[[dict[str, float]], None] | None = None,
    offsets: dict[str, Any] | None = None,
) -> TrainResult:
    """One learner step: new samples -> policy-gradient updates -> a checkpoint with lineage."""
    start = time.monotonic()
    cfg, weights, parent, hf_path = _load_start(args)
    since = (
        parent.lineage.table_versions if (parent and args.incremental and parent.lineage.lake_uri) else None
    )
    judge_version, judge_from = args.judge_version, "given" if args.judge_version else "most_common"
    if since and parent is not None:
        _check_selection(args, parent)
        if (
            judge_version is None
            and parent.lineage.judge_name == args.judge_name
            and parent.lineage.judge_version
        ):
            judge_version, judge_from = parent.lineage.judge_version, "parent"  # inherited, and said so
    data: SampleSet = load_samples(
        DatasetSpec(
            lake=args.lake,
            judge_name=args.judge_name,
            judge_version=judge_version,
            since=since or None,
            since_judge_version=parent.lineage.judge_version if (since and parent) else None,
            task_ids=frozenset(args.task_ids) if args.task_ids is not None else None,
            families=frozenset(args.families) if args.families is not None else None,
            max_group_wait_s=args.max_group_wait_s,
        )
    )
    lags = policy_lags(data.table.column("policy_version").to_pylist(), _parent_lineage(args.lake, parent))
    record_policy_lag(lags)
    lag_counts: dict[str, int] = {}
    for lag in lags:
        key = "unknown" if lag is None else str(lag)
        lag_counts[key] = lag_counts.get(key, 0) + 1
    if args.max_policy_lag is not None:
        data.keep([lag is not None and lag <= args.max_policy_lag for lag in lags], "policy_lag")
    # an id the model has no embedding for would stop every step on this data: left out, counted
    data.keep(max_token_ids(data.table) < cfg.vocab_size, "token_out_of_vocab")
    groups_seen, zero_groups = _drop_zero_advantage(data) if args.drop_zero_advantage_groups else (0, 0)
    if not len(data):
        return TrainResult(None, 0, 0.0, [], time.monotonic() - start)
    opt_state = load_optimizer_state(args.parent) if (args.parent and args.resume_optimizer) else None
    new_weights, rows, opt_state = update(
        cfg, weights, data, args, opt_state=opt_state, on_step=on_step, hf_path=hf_path
    )
    summary = {
        "loss": float(np.mean([r["loss"] for r in rows])),
        "kl": float(np.mean([r.get("kl", 0.0) for r in rows])),
        "clip_frac": float(np.mean([r.get("clip_frac", 0.0) for r in rows])),
        "logp_mismatch_mean": float(np.mean([r.get("logp_mismatch_mean", 0.0) for r in rows])),
        "logp_mismatch_max": float(np.max([r.get("logp_mismatch_max", 0.0) for r in rows])),
        "samples_excluded": dict(data.skipped),
        "selection": {
            **selection_of(args),
            "judge": {"name": data.judge_name, "version": data.judge_version, "from": judge_from},
        },
        "param_dtype": "float32",
        "token_history": dict(data.token_history),
        "sequences_truncated": truncated(data, cfg.max_len),
        "zero_advantage_groups": zero_groups,
        "zero_advantage_group_frac": zero_groups / groups_seen if groups_seen else 0.0,
        "entropy_estimate": float(np.mean([r.get("entropy_estimate", 0.0) for r in rows])),
        "policy_lag": lag_counts,
        "mean_reward": data.mean_reward,
        "episodes": data.episodes,
        "steps": len(rows),
        "skipped": dict(data.skipped),
        "args": {k: v for k, v in asdict(args).items() if k not in ("task_ids", "families", "model")},
    }
    info = save_checkpoint(
        args.checkpoint_root,
        policy_id=args.policy_id,
        backend=args.backend,
        config=cfg,
        weights=new_weights,
        lineage=Lineage(
            lake_uri=_lake_uri(args.lake),
            table_versions=data.table_versions,
            judge_name=data.judge_name,
            judge_version=data.judge_version,
            num_samples=len(data),
            parent_id=parent.checkpoint_id if parent else None,
            offsets=offsets or {},
            metrics=summary,
        ),
        optimizer=opt_state,
        hf_source=hf_path,
    )
    _write_metrics(Path(info.path) / "metrics.jsonl", rows)
    return TrainResult(info, len(data), data.mean_reward, rows, time.monotonic() - start)


def update(
    cfg: ModelConfig,
    weights: dict[str, np.ndarray] | None,
    samples: Sequence[Sample] | SampleSet,
    args: TrainArgs,
    *,
    opt_state: OptimizerState | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
    hf_path: Path | None = None,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]], OptimizerState]:
    """The policy-gradient updates of one learner step on ``samples`` (the loss :func:`train` uses).

    With ``hf_path``, the model is the Hugging Face causal LM there (its own weights unless
    ``weights`` are given), trained in torch through the same batches and loss.

    Returns the new weights, the metrics per minibatch and the optimiser's state after them.

    Raises:
        LearnerConfigError: an unknown backend, a Hugging Face model with the JAX backend, or an
            optimiser state of other parameters.
    """
    if args.backend not in ("torch", "jax"):
        raise LearnerConfigError(f"unknown learner backend {args.backend!r}: torch or jax")
    if hf_path is not None and args.backend != "torch":
        raise LearnerConfigError("a Hugging Face model trains with the torch backend; use --backend torch")
    if opt_state is not None and weights is not None:
        bad = sorted(k for k, w in weights.items() if k in opt_state.m and opt_state.m[k].shape != w.shape)
        if bad or not set(opt_state.m) <= set(weights):
            raise LearnerConfigError(
                "the parent's optimizer.npz does not match its weights (" + ", ".join(bad[:3] or ["names"])
                + "); train with resume_optimizer=False"
            )  # fmt: skip
    batches = Batches(samples, batch_size=args.batch_size, max_len=cfg.max_len, seed=args.seed,
                      scale_advantages=args.scale_advantages)  # fmt: skip
    if args.backend == "torch":
        return _torch_step(cfg, weights, batches, args, on_step, opt_state, hf_path)
    return _jax_step(cfg, weights, batches, args, on_step, opt_state)


def supervised_warm_start(
    pairs: Sequence[tuple[str, str]],
    *,
    checkpoint_root: str,
    steps: int = 200,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    policy_id: str = "tinylm",
    model: ModelConfig | None = None,
    note: str = "supervised warm start",
    target_loss: float | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
    stop_when: Callable[[Any], bool] | None = None,
    check_every: int = 25,
) -> CheckpointInfo:
    """Next-token training on (prompt, completion) pairs (torch): a starting point for RL.

    Its lineage says plainly that it came from these pairs, not from the lake.
    With ``target_loss`` training stops once the mean loss of the last 20
    steps falls below it (so the warm start only starts the skill off). With
    ``stop_when`` it stops at the first check (every ``check_every`` steps) where
    ``stop_when(model)`` is true: e.g. a measured success rate on validation data.
    """
    import torch
    import torch.nn.functional as F

    from learners.torch_model import TinyLM

    torch.manual_seed(seed)
    cfg = model or ModelConfig()
    tok = CharTokenizer()
    net = TinyLM(cfg)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    encoded = [([tok.BOS, *tok.encode(p)], [*tok.encode(c), tok.EOS]) for p, c in pairs]
    losses = []
    for step in range(steps):
        idx = rng.integers(0, len(encoded), size=batch_size)
        rows = [encoded[i][0] + encoded[i][1] for i in idx]
        width = min(cfg.max_len, max(map(len, rows)))
        ids = torch.full((batch_size, width), tok.PAD, dtype=torch.long)
        target_mask = torch.zeros((batch_size, width))
        for r, i in enumerate(idx):
            row = rows[r][:width]
            ids[r, : len(row)] = torch.tensor(row)
            target_mask[r, len(encoded[i][0]) : len(row)] = 1.0
        logits = net(ids)[:, :-1]
        loss_t = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        )
        m = target_mask[:, 1:].reshape(-1)
        loss = (loss_t * m).sum() / m.sum()
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        losses.append(float(loss.detach()))
        if on_step:
            on_step({"step": step, "loss": losses[-1]})
        if target_loss is not None and len(losses) >= 20 and float(np.mean(losses[-20:])) < target_loss:
            break  # stop as soon as the model has started to do the task, and no later
        if stop_when is not None and (step + 1) % check_every == 0:
            net.eval()
            done = stop_when(net)
            net.train()
            if done:
                break
    return save_checkpoint(
        checkpoint_root,
        policy_id=policy_id,
        backend="torch",
        config=cfg,
        weights={k: v.detach().numpy() for k, v in net.state_dict().items()},
        lineage=Lineage(
            lake_uri="",
            table_versions={},
            judge_name=None,
            judge_version=None,
            num_samples=len(pairs),
            metrics={"final_loss": float(np.mean(losses[-20:])), "steps": len(losses)},
            note=note,
        ),
    )
