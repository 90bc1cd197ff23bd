"""The policy language model in pure JAX: the same decoder-only transformer as :mod:`learners.torch_model`.

Parameters are a flat ``dict[str, jax.Array]`` with exactly the names and shapes of
``TinyLM.state_dict()`` (listed in :mod:`learners.torch_model`); Linear weights keep PyTorch's
``[out, in]`` layout and are applied as ``x @ W.T + b``. Everything is float32 (also with
``jax_enable_x64`` on) and matrix products use full float32 precision, so the two frameworks agree to
rounding. :func:`forward` and :func:`sequence_logprobs` are jitted with ``cfg`` static, so they compile
once per input shape: pad batches to a few fixed shapes. :func:`generate` runs on a ``[1, max_len]``
buffer and so compiles once per config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from learners.config import ModelConfig

Params = dict[str, jax.Array]

LN_EPS = 1e-5
INIT_STD = 0.02
_HIGHEST = jax.lax.Precision.HIGHEST


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every parameter, in ``TinyLM.state_dict()`` order.

    Args:
        cfg: the model's sizes.

    Returns:
        ``{name: shape}``.
    """
    d, f = cfg.d_model, cfg.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        "tok_emb.weight": (cfg.vocab_size, d),
        "pos_emb.weight": (cfg.max_len, d),
    }
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        shapes.update(
            {
                p + "ln1.weight": (d,),
                p + "ln1.bias": (d,),
                p + "attn.qkv.weight": (3 * d, d),
                p + "attn.qkv.bias": (3 * d,),
                p + "attn.proj.weight": (d, d),
                p + "attn.proj.bias": (d,),
                p + "ln2.weight": (d,),
                p + "ln2.bias": (d,),
                p + "mlp.fc1.weight": (f, d),
                p + "mlp.fc1.bias": (f,),
                p + "mlp.fc2.weight": (d, f),
                p + "mlp.fc2.bias": (d,),
            }
        )
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,), "lm_head.weight": (cfg.vocab_size, d)})
    return shapes


def init_params(cfg: ModelConfig, seed: int = 0) -> Params:
    """Initialises parameters: weights and embeddings ~ N(0, 0.02), biases 0, LayerNorm weights 1.

    Args:
        cfg: the model's sizes.
        seed: seed of the ``jax.random`` key.

    Returns:
        The parameters, float32, named as in ``TinyLM.state_dict()``.
    """
    shapes = param_shapes(cfg)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(shapes))
    params: Params = {}
    for key, (name, shape) in zip(keys, shapes.items()):
        if name.endswith(".bias"):
            params[name] = jnp.zeros(shape, jnp.float32)
        elif name.rsplit(".", 2)[-2] in ("ln1", "ln2", "ln_f"):
            params[name] = jnp.ones(shape, jnp.float32)
        else:
            params[name] = INIT_STD * jax.random.normal(key, shape, jnp.float32)
    return params


def _linear(x: jax.Array, w: jax.Array, b: jax.Array | None = None) -> jax.Array:
    y = jnp.matmul(x, w.T, precision=_HIGHEST)
    return y if b is None else y + b


def _layer_norm(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LN_EPS) * w + b


def _attention(params: Params, prefix: str, x: jax.Array, n_heads: int) -> jax.Array:
    b, t, d = x.shape
    hd = d // n_heads
    qkv = _linear(x, params[prefix + "qkv.weight"], params[prefix + "qkv.bias"])
    q, k, v = (z.reshape(b, t, n_heads, hd).transpose(0, 2, 1, 3) for z in jnp.split(qkv, 3, axis=-1))
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k, precision=_HIGHEST) * (1.0 / math.sqrt(hd))
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    scores = jnp.where(causal, scores, -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bhkd->bhqd", weights, v, precision=_HIGHEST)
    out = out.transpose(0, 2, 1, 3).reshape(b, t, d)
    return _linear(out, params[prefix + "proj.weight"], params[prefix + "proj.bias"])


def _forward(params: Params, ids: jax.Array, cfg: ModelConfig) -> jax.Array:
    t = ids.shape[1]
    if t > cfg.max_len:
        raise ValueError(f"sequence length {t} exceeds max_len {cfg.max_len}")
    x = params["tok_emb.weight"][ids] + params["pos_emb.weight"][:t][None]
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        x = x + _attention(
            params, p + "attn.", _layer_norm(x, params[p + "ln1.weight"], params[p + "ln1.bias"]), cfg.n_heads
        )
        h = _layer_norm(x, params[p + "ln2.weight"], params[p + "ln2.bias"])
        h = jax.nn.gelu(
            _linear(h, params[p + "mlp.fc1.weight"], params[p + "mlp.fc1.bias"]), approximate=False
        )
        x = x + _linear(h, params[p + "mlp.fc2.weight"], params[p + "mlp.fc2.bias"])
    x = _layer_norm(x, params["ln_f.weight"], params["ln_f.bias"])
    return _linear(x, params["lm_head.weight"])


_forward_jit = jax.jit(_forward, static_argnames=("cfg",))


def forward(params: Params, ids: jax.Array, cfg: ModelConfig) -> jax.Array:
    """Computes next-token logits (jitted, ``cfg`` static).

    Args:
        params: the parameters (see :func:`init_params`).
        ids: ``[B, T]`` integer token ids, ``T <= cfg.max_len``.
        cfg: the model's sizes.

    Returns:
        ``[B, T, V]`` float32 logits; position ``t`` scores the token at ``t + 1``.

    Raises:
        ValueError: if ``T > cfg.max_len``.
    """
    logits: jax.Array = _forward_jit(params, jnp.asarray(ids, dtype=jnp.int32), cfg)
    return logits


def _token_logprobs(logits: jax.Array, targets: jax.Array) -> jax.Array:
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return picked - jax.nn.logsumexp(logits, axis=-1)


@partial(jax.jit, static_argnames=("cfg",))
def _sequence_logprobs(
    params: Params, input_ids: jax.Array, completion_mask: jax.Array, temperature: jax.Array, cfg: ModelConfig
) -> jax.Array:
    logits = _forward(params, input_ids, cfg) / temperature[:, None, None]
    logp = _token_logprobs(logits[:, :-1], input_ids[:, 1:])
    logp = jnp.where(completion_mask[:, 1:] != 0, logp, 0.0)
    return jnp.pad(logp, ((0, 0), (1, 0)))


def sequence_logprobs(
    params: Params,
    input_ids: jax.Array,
    completion_mask: jax.Array,
    cfg: ModelConfig,
    temperature: jax.Array | float | None = None,
) -> jax.Array:
    """Log-probabilities of the completion tokens under the sampling distribution (jitted, differentiable).

    Args:
        params: the parameters.
        input_ids: ``[B, T]`` integer ids: prompt followed by completion, right-padded with PAD.
        completion_mask: ``[B, T]`` float or bool, nonzero where ``input_ids`` holds a completion token.
            Position 0 has no preceding logits and is never scored.
        cfg: the model's sizes.
        temperature: the temperature each row was sampled at (``[B]`` or one number; ``None``: 1):
            the score is ``log_softmax(logits / T)``, the distribution :func:`generate` drew from.

    Returns:
        ``[B, T]`` float32: ``log p_T(input_ids[:, t] | input_ids[:, :t])`` (from the logits at ``t - 1``)
        where the mask is nonzero, 0 elsewhere (and always 0 at position 0).
    """
    ids = jnp.asarray(input_ids, dtype=jnp.int32)
    t = jnp.broadcast_to(jnp.asarray(1.0 if temperature is None else temperature, jnp.float32), ids.shape[:1])
    logp: jax.Array = _sequence_logprobs(params, ids, jnp.asarray(completion_mask), t, cfg)
    return logp


@partial(jax.jit, static_argnames=("cfg",))
def _next_logits(params: Params, ids: jax.Array, pos: jax.Array, cfg: ModelConfig) -> jax.Array:
    # ids is [1, max_len], right-padded; causality makes the padding invisible at position `pos`.
    return _forward(params, ids, cfg)[0, pos]


def generate(
    params: Params,
    prompt_ids: list[int],
    *,
    cfg: ModelConfig,
    max_new_tokens: int,
    temperature: float = 1.0,
    greedy: bool = False,
    rng: np.random.Generator | None = None,
    eos_id: int = 2,
) -> tuple[list[int], list[float]]:
    """Samples a completion of one prompt, token by token (compiled once per ``cfg``).

    Args:
        params: the parameters.
        prompt_ids: the prompt's ids (at least one, e.g. starting with BOS).
        cfg: the model's sizes.
        max_new_tokens: most tokens to generate; fewer when ``prompt + completion`` would exceed
            ``cfg.max_len``, or when ``eos_id`` is emitted.
        temperature: sampling temperature (> 0); ignored when ``greedy``.
        greedy: take the argmax instead of sampling.
        rng: numpy random generator for sampling (a fresh unseeded one when None).
        eos_id: generation stops after this id is emitted (it is included in the completion).

    Returns:
        ``(completion ids, logprobs)``: each token's log-probability under the distribution it was drawn
        from, ``log_softmax(logits / temperature)`` (``log_softmax(logits)`` when greedy).

    Raises:
        ValueError: on an empty prompt, a prompt longer than ``cfg.max_len``, a negative
            ``max_new_tokens`` or a non-positive temperature when sampling.
    """
    if not prompt_ids:
        raise ValueError("prompt_ids must hold at least one token")
    if len(prompt_ids) > cfg.max_len:
        raise ValueError(f"prompt of {len(prompt_ids)} tokens exceeds max_len {cfg.max_len}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 when sampling, got {temperature}")
    if rng is None:
        rng = np.random.default_rng()
    n_new = min(max_new_tokens, cfg.max_len - len(prompt_ids))
    buf = np.zeros((1, cfg.max_len), dtype=np.int32)
    buf[0, : len(prompt_ids)] = prompt_ids
    length = len(prompt_ids)
    completion: list[int] = []
    logprobs: list[float] = []
    for _ in range(n_new):
        logits = _next_logits(params, jnp.asarray(buf), jnp.int32(length - 1), cfg)
        if greedy:
            logp = np.asarray(jax.nn.log_softmax(logits))
            token = int(np.argmax(logp))
        else:
            logp = np.asarray(jax.nn.log_softmax(logits / jnp.float32(temperature)))
            probs = np.exp(logp.astype(np.float64))
            token = int(rng.choice(probs.shape[0], p=probs / probs.sum()))
        completion.append(token)
        logprobs.append(float(logp[token]))
        if token == eos_id:
            break
        buf[0, length] = token
        length += 1
    return completion, logprobs


def params_from_numpy(arrays: Mapping[str, np.ndarray]) -> Params:
    """Converts numpy arrays (e.g. a ``TinyLM.state_dict()`` moved to numpy) to float32 JAX parameters.

    Args:
        arrays: ``{name: array}``.

    Returns:
        ``{name: float32 jax.Array}``, same names.
    """
    return {name: jnp.asarray(np.asarray(a, dtype=np.float32)) for name, a in arrays.items()}


def params_to_numpy(params: Mapping[str, jax.Array]) -> dict[str, np.ndarray]:
    """Converts JAX parameters to numpy arrays (e.g. to load into ``TinyLM`` or to save).

    Args:
        params: ``{name: jax.Array}``.

    Returns:
        ``{name: numpy array}``, same names, writable copies.
    """
    return {name: np.array(a) for name, a in params.items()}
