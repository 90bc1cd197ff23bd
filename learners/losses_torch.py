"""Group-relative advantages and the clipped, importance-weighted policy-gradient loss, in PyTorch.

The maths is identical to :mod:`learners.losses_jax` (a differential test holds them together).
"""

from __future__ import annotations

import torch


def group_advantages(rewards: torch.Tensor, group_index: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Normalises rewards within each group: ``(r - mean_g) / (std_g + eps)``.

    ``std_g`` is the population standard deviation (ddof=0). A group whose rewards are all equal gets
    advantage exactly 0 for all its members (whatever the rounding of its mean). Works on a ``[B, B]``
    same-group matrix, which is cheap for RL batch sizes and needs no group count.

    Args:
        rewards: ``[B]`` float rewards.
        group_index: ``[B]`` int group ids (0..G-1; any distinct ints work).
        eps: added to the standard deviation.

    Returns:
        ``[B]`` advantages, in the rewards' float dtype (float32 for integer rewards).
    """
    r = rewards if rewards.is_floating_point() else rewards.float()
    if r.dim() != 1 or group_index.shape != r.shape:
        raise ValueError(
            f"rewards and group_index must both be [B], got {tuple(r.shape)} and {tuple(group_index.shape)}"
        )
    g = group_index.to(r.device)
    same = g[:, None] == g[None, :]
    samef = same.to(r.dtype)
    count = samef.sum(dim=1)
    mean = (samef * r[None, :]).sum(dim=1) / count
    var = (samef * (r[None, :] - mean[:, None]) ** 2).sum(dim=1) / count
    std = var.sqrt()
    hi = torch.where(same, r[None, :], torch.full_like(samef, -torch.inf)).amax(dim=1)
    lo = torch.where(same, r[None, :], torch.full_like(samef, torch.inf)).amin(dim=1)
    adv = (r - mean) / (std + eps)
    return torch.where(hi == lo, torch.zeros_like(adv), adv)


def policy_loss(
    new_logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    is_weights: torch.Tensor | None = None,
    dual_clip: float | None = None,
    clip_eps_high: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped, importance-weighted policy-gradient loss (GRPO-style), token-mean over the mask.

    Per token, with ``ratio = exp(new_logp - old_logp)``::

        obj_t = min(ratio * A, clip(ratio, 1 - clip_eps, 1 + clip_eps) * A)
        obj_t = max(obj_t, dual_clip * A)         if A < 0 and dual_clip is set (dual-clip PPO)
        pg_t = -obj_t * w_t                       w_t: the rollout-correction weight (1 without)
        kl_t = exp(ref_logp - new_logp) - (ref_logp - new_logp) - 1        (k3 estimator)
        pg   = sum(pg_t * mask) / max(sum(mask), 1)            (kl likewise)
        loss = pg + kl_coef * kl

    Log-ratios at unmasked positions are set to 0 before exponentiating, so padding can never turn
    the loss or its gradient into inf/nan.

    Args:
        new_logp: ``[B, T]`` log-probabilities under the policy being trained (carries the gradient).
        old_logp: ``[B, T]`` log-probabilities under the policy that sampled the tokens (detached).
        advantages: ``[B]`` one advantage per sequence (detached).
        mask: ``[B, T]`` float (or bool), 1 at completion tokens.
        clip_eps: the ratio is clipped to ``[1 - clip_eps, 1 + clip_eps]``.
        clip_eps_high: the upper bound's own epsilon (clip-higher, DAPO: ``[1 - clip_eps,
            1 + clip_eps_high]``, room for unlikely tokens to rise); ``None``: ``clip_eps``.
        ref_logp: ``[B, T]`` log-probabilities under the reference policy (detached); the KL term is 0
            without it.
        kl_coef: weight of the KL term.
        is_weights: ``[B, T]`` per-token importance weights of the behaviour policy against the
            proximal one (truncated by the caller; no gradient), as in decoupled PPO.
        dual_clip: the dual-clip bound ``c > 1`` (Ye et al. 2020, "Mastering Complex Control in MOBA
            Games with Deep RL"): for negative advantages the objective is at least ``c * A``.

    Returns:
        ``(loss, metrics)``: the scalar loss, and detached 0-d tensors ``pg_loss``, ``kl``,
        ``clip_frac`` (fraction of masked tokens with ``|ratio - 1| > clip_eps``) and ``ratio_mean``
        (masked mean of the ratio); ``float(v)`` turns one into a Python float.
    """
    old_logp = old_logp.detach()
    m = mask.to(new_logp.dtype)
    on = m != 0
    denom = m.sum().clamp(min=1.0)
    zero = torch.zeros_like(new_logp)
    log_ratio = torch.where(on, new_logp - old_logp, zero)
    ratio = torch.exp(log_ratio)
    adv = advantages.detach().to(new_logp.dtype)[:, None]
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + (clip_eps if clip_eps_high is None else clip_eps_high))
    obj = torch.minimum(ratio * adv, clipped * adv)
    if dual_clip is not None:  # a stale sample with A < 0 and a huge ratio cannot dominate the batch
        obj = torch.where(adv < 0, torch.maximum(obj, dual_clip * adv), obj)
    pg_t = -obj
    if is_weights is not None:
        pg_t = pg_t * is_weights.detach().to(pg_t.dtype)
    pg = (pg_t * m).sum() / denom
    if ref_logp is not None:
        d = torch.where(on, ref_logp.detach() - new_logp, zero)
        kl_t = torch.exp(d) - d - 1.0
        kl = (kl_t * m).sum() / denom
    else:
        kl = torch.zeros((), dtype=new_logp.dtype, device=new_logp.device)
    loss = pg + kl_coef * kl
    with torch.no_grad():
        clip_frac = (((ratio - 1.0).abs() > clip_eps).to(m.dtype) * m).sum() / denom
        ratio_mean = (ratio * m).sum() / denom
    metrics = {
        "pg_loss": pg.detach(),
        "kl": kl.detach(),
        "clip_frac": clip_frac,
        "ratio_mean": ratio_mean,
    }
    return loss, metrics
