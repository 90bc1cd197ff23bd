"""Group-relative advantages and the clipped, importance-weighted policy-gradient loss, in JAX.

The maths is identical to :mod:`learners.losses_torch` (a differential test holds them together).
Both functions are jittable; :func:`policy_loss` is differentiable with respect to ``new_logp``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def group_advantages(rewards: jax.Array, group_index: jax.Array, eps: float = 1e-6) -> jax.Array:
    """Normalises rewards within each group: ``(r - mean_g) / (std_g + eps)``.

    ``std_g`` is the population standard deviation (ddof=0). A group whose rewards are all equal gets
    advantage exactly 0 for all its members (whatever the rounding of its mean). Works on a ``[B, B]``
    same-group matrix, which is cheap for RL batch sizes, needs no group count and so jits.

    Args:
        rewards: ``[B]`` float rewards.
        group_index: ``[B]`` int group ids (0..G-1; any distinct ints work).
        eps: added to the standard deviation.

    Returns:
        ``[B]`` advantages, in the rewards' float dtype (float32 for integer rewards).
    """
    r = jnp.asarray(rewards)
    if not jnp.issubdtype(r.dtype, jnp.floating):
        r = r.astype(jnp.float32)
    g = jnp.asarray(group_index)
    if r.ndim != 1 or g.shape != r.shape:
        raise ValueError(f"rewards and group_index must both be [B], got {r.shape} and {g.shape}")
    same = g[:, None] == g[None, :]
    samef = same.astype(r.dtype)
    count = samef.sum(axis=1)
    mean = (samef * r[None, :]).sum(axis=1) / count
    var = (samef * (r[None, :] - mean[:, None]) ** 2).sum(axis=1) / count
    std = jnp.sqrt(var)
    hi = jnp.where(same, r[None, :], -jnp.inf).max(axis=1)
    lo = jnp.where(same, r[None, :], jnp.inf).min(axis=1)
    adv = (r - mean) / (std + eps)
    return jnp.where(hi == lo, jnp.zeros_like(adv), adv)


def policy_loss(
    new_logp: jax.Array,
    old_logp: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    clip_eps: float = 0.2,
    ref_logp: jax.Array | None = None,
    kl_coef: float = 0.0,
    is_weights: jax.Array | None = None,
    dual_clip: float | None = None,
    clip_eps_high: float | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The clipped, importance-weighted policy-gradient loss (GRPO-style), token-mean over the mask.

    Per token, with ``ratio = exp(new_logp - old_logp)``::

        obj_t = min(ratio * A, clip(ratio, 1 - clip_eps, 1 + clip_eps) * A)
        obj_t = max(obj_t, dual_clip * A)         if A < 0 and dual_clip is set (dual-clip PPO)
        pg_t = -obj_t * w_t                       w_t: the rollout-correction weight (1 without)
        kl_t = exp(ref_logp - new_logp) - (ref_logp - new_logp) - 1        (k3 estimator)
        pg   = sum(pg_t * mask) / max(sum(mask), 1)            (kl likewise)
        loss = pg + kl_coef * kl

    Log-ratios at unmasked positions are set to 0 before exponentiating, so padding can never turn
    the loss or its gradient into inf/nan. Use ``jax.grad(..., has_aux=True)`` on it directly.

    Args:
        new_logp: ``[B, T]`` log-probabilities under the policy being trained.
        old_logp: ``[B, T]`` log-probabilities under the policy that sampled the tokens (no gradient).
        advantages: ``[B]`` one advantage per sequence (no gradient).
        mask: ``[B, T]`` float (or bool), 1 at completion tokens.
        clip_eps: the ratio is clipped to ``[1 - clip_eps, 1 + clip_eps]``.
        clip_eps_high: the upper bound's own epsilon (clip-higher, DAPO: ``[1 - clip_eps,
            1 + clip_eps_high]``, room for unlikely tokens to rise); ``None``: ``clip_eps``.
        ref_logp: ``[B, T]`` log-probabilities under the reference policy (no gradient); the KL term is 0
            without it.
        kl_coef: weight of the KL term.
        is_weights: ``[B, T]`` per-token importance weights of the behaviour policy against the
            proximal one (truncated by the caller; no gradient), as in decoupled PPO.
        dual_clip: the dual-clip bound ``c > 1`` (Ye et al. 2020, "Mastering Complex Control in MOBA
            Games with Deep RL"): for negative advantages the objective is at least ``c * A``.

    Returns:
        ``(loss, metrics)``: the scalar loss, and 0-d arrays (gradient stopped) ``pg_loss``, ``kl``,
        ``clip_frac`` (fraction of masked tokens with ``|ratio - 1| > clip_eps``) and ``ratio_mean``
        (masked mean of the ratio).
    """
    dtype = new_logp.dtype
    old_logp = jax.lax.stop_gradient(old_logp)
    m = jnp.asarray(mask).astype(dtype)
    on = m != 0
    denom = jnp.maximum(m.sum(), 1.0)
    log_ratio = jnp.where(on, new_logp - old_logp, 0.0)
    ratio = jnp.exp(log_ratio)
    adv = jax.lax.stop_gradient(jnp.asarray(advantages).astype(dtype))[:, None]
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + (clip_eps if clip_eps_high is None else clip_eps_high))
    obj = jnp.minimum(ratio * adv, clipped * adv)
    if dual_clip is not None:  # a stale sample with A < 0 and a huge ratio cannot dominate the batch
        obj = jnp.where(adv < 0, jnp.maximum(obj, dual_clip * adv), obj)
    pg_t = -obj
    if is_weights is not None:
        pg_t = pg_t * jax.lax.stop_gradient(jnp.asarray(is_weights).astype(dtype))
    pg = (pg_t * m).sum() / denom
    if ref_logp is not None:
        d = jnp.where(on, jax.lax.stop_gradient(ref_logp) - new_logp, 0.0)
        kl_t = jnp.exp(d) - d - 1.0
        kl = (kl_t * m).sum() / denom
    else:
        kl = jnp.zeros((), dtype)
    loss = pg + kl_coef * kl
    sg = jax.lax.stop_gradient
    clip_frac = ((jnp.abs(sg(ratio) - 1.0) > clip_eps).astype(dtype) * m).sum() / denom
    ratio_mean = (sg(ratio) * m).sum() / denom
    metrics = {"pg_loss": sg(pg), "kl": sg(kl), "clip_frac": clip_frac, "ratio_mean": ratio_mean}
    return loss, metrics
