"""The policy language model in PyTorch: a small decoder-only transformer (:class:`TinyLM`).

Architecture (``D = d_model``, ``V = vocab_size``, ``F = d_ff``, ``L = max_len``)::

    x = tok_emb[ids] + pos_emb[0..T-1]
    for each block:   x = x + attn(ln1(x));   x = x + mlp(ln2(x))
    logits = lm_head(ln_f(x))

Attention is causal multi-head self-attention with a fused ``qkv`` projection whose output is split,
in this order, into q, k and v (each ``[B, T, D]``, heads taken as consecutive ``D / n_heads`` slices);
the MLP is ``fc2(gelu(fc1(x)))`` with the exact (erf) GELU; LayerNorms use ``eps = 1e-5``.
Linear layers compute ``x @ W.T + b`` with ``W`` stored ``[out, in]``.

Parameter names and shapes (``TinyLM.state_dict()``; :mod:`learners.jax_model` uses the same)::

    tok_emb.weight               [V, D]
    pos_emb.weight               [L, D]
    blocks.{i}.ln1.weight        [D]        blocks.{i}.ln1.bias        [D]
    blocks.{i}.attn.qkv.weight   [3D, D]    blocks.{i}.attn.qkv.bias   [3D]
    blocks.{i}.attn.proj.weight  [D, D]     blocks.{i}.attn.proj.bias  [D]
    blocks.{i}.ln2.weight        [D]        blocks.{i}.ln2.bias        [D]
    blocks.{i}.mlp.fc1.weight    [F, D]     blocks.{i}.mlp.fc1.bias    [F]
    blocks.{i}.mlp.fc2.weight    [D, F]     blocks.{i}.mlp.fc2.bias    [D]
    ln_f.weight                  [D]        ln_f.bias                  [D]
    lm_head.weight               [V, D]     (untied from tok_emb, no bias)

Initialisation: weights and embeddings ~ N(0, 0.02), biases 0, LayerNorm weights 1.

:func:`sequence_logprobs` and :func:`generate` work with any module whose ``forward`` maps ids
``[B, T]`` to logits ``[B, T, V]`` and that has a ``max_len`` attribute (``TinyLM`` and
:class:`learners.hf_model.HFPolicyModel`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from learners.config import ModelConfig
from learners.errors import DeviceUnavailableError

LN_EPS = 1e-5
INIT_STD = 0.02


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with a fused qkv projection."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=True)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attends every position to itself and the positions before it.

        Args:
            x: ``[B, T, D]`` normalised residual stream.

        Returns:
            ``[B, T, D]``.
        """
        b, t, d = x.shape
        hd = d // self.n_heads
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, hd).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1).to(v.dtype)
        out = (weights @ v).transpose(1, 2).reshape(b, t, d)
        y: torch.Tensor = self.proj(out)
        return y


class MLP(nn.Module):
    """Position-wise feed-forward network: ``fc2(gelu(fc1(x)))`` with the exact (erf) GELU."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=True)
        self.fc2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Applies the MLP.

        Args:
            x: ``[B, T, D]``.

        Returns:
            ``[B, T, D]``.
        """
        y: torch.Tensor = self.fc2(F.gelu(self.fc1(x), approximate="none"))
        return y


class Block(nn.Module):
    """One pre-LayerNorm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=LN_EPS)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=LN_EPS)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Applies the block.

        Args:
            x: ``[B, T, D]`` residual stream.

        Returns:
            ``[B, T, D]``.
        """
        x = x + self.attn(self.ln1(x))
        y: torch.Tensor = x + self.mlp(self.ln2(x))
        return y


class TinyLM(nn.Module):
    """A small decoder-only transformer language model (see the module docstring for its layout).

    Attributes:
        cfg: the model's sizes.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=LN_EPS)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.reset_parameters()

    @property
    def max_len(self) -> int:
        """The longest sequence the model accepts (``cfg.max_len``)."""
        return self.cfg.max_len

    def reset_parameters(self) -> None:
        """Initialises weights and embeddings ~ N(0, 0.02), biases to 0 and LayerNorm weights to 1."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Computes next-token logits.

        Args:
            ids: ``[B, T]`` long token ids, ``T <= cfg.max_len``.

        Returns:
            ``[B, T, V]`` float32 logits; position ``t`` scores the token at ``t + 1``.

        Raises:
            ValueError: if ``ids`` is not 2-D or longer than ``cfg.max_len``.
        """
        return self.head(self.hidden(ids))

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """The final hidden states, ``ln_f`` applied: ``[B, T, D]`` (what :meth:`head` maps to logits).

        Args:
            ids: ``[B, T]`` long token ids, ``T <= cfg.max_len``.

        Returns:
            ``[B, T, D]``.

        Raises:
            ValueError: if ``ids`` is not 2-D or longer than ``cfg.max_len``.
        """
        if ids.dim() != 2:
            raise ValueError(f"ids must be [B, T], got shape {tuple(ids.shape)}")
        t = ids.shape[1]
        if t > self.cfg.max_len:
            raise ValueError(f"sequence length {t} exceeds max_len {self.cfg.max_len}")
        pos = torch.arange(t, device=ids.device)
        x = self.tok_emb(ids) + self.pos_emb(pos)[None]
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.ln_f(x)
        return out

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``[..., V]`` of hidden states ``[..., D]``."""
        logits: torch.Tensor = self.lm_head(h)
        return logits.float()


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[target]`` per position, in float32.

    Args:
        logits: ``[..., V]``.
        targets: ``[...]`` long.

    Returns:
        ``[...]`` float32.
    """
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


LOGIT_CHUNK = 512
"""Scored positions whose full-vocabulary logits :func:`sequence_logprobs` holds at once (with a 150k
vocabulary, 512 positions of float32 logits are about 300 MB, freed before the next chunk)."""


def _chunk_logprobs(
    head: Callable[[torch.Tensor], torch.Tensor],
    h: torch.Tensor,
    targets: torch.Tensor,
    temperature: torch.Tensor | None,
) -> torch.Tensor:
    logits = head(h).float()
    if temperature is not None:
        logits = logits / temperature[:, None]
    return _token_logprobs(logits, targets)


def sequence_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: torch.Tensor | float | None = None,
    *,
    chunk: int | None = LOGIT_CHUNK,
) -> torch.Tensor:
    """Log-probabilities of the completion tokens under the model's sampling distribution (differentiable).

    A model with ``hidden(ids) -> [B, T, D]`` and ``head(h) -> [..., V]`` (:class:`TinyLM`,
    :class:`learners.hf_model.HFPolicyModel` of most architectures) is scored without ever holding
    ``[B, T, V]`` logits: only the completion positions go through the output layer, ``chunk`` of
    them at a time, and under autograd each chunk's logits are recomputed in the backward pass
    instead of kept (activation checkpointing of the output layer, as fused linear-cross-entropy
    kernels do), so the full-vocabulary float32 logits of one chunk are the most that ever exist.
    Other models (and ``chunk=None``) take the plain path: ``model(ids)`` logits, then log-softmax.

    Args:
        model: :class:`TinyLM` or any module mapping ids ``[B, T]`` to logits ``[B, T, V]``.
        input_ids: ``[B, T]`` long: prompt followed by completion, right-padded with PAD.
        completion_mask: ``[B, T]`` float or bool, nonzero where ``input_ids`` holds a completion token.
            Position 0 has no preceding logits and is never scored.
        temperature: the temperature each row was sampled at (``[B]`` or one number; ``None``: 1), so
            the score is ``log_softmax(logits / T)``, the distribution :func:`generate` drew from.
        chunk: scored positions per pass through the output layer (``None``: the plain path).

    Returns:
        ``[B, T]`` float32: ``log p_T(input_ids[:, t] | input_ids[:, :t])`` (from the logits at ``t - 1``)
        where the mask is nonzero, 0 elsewhere (and always 0 at position 0).
    """
    hidden = getattr(model, "hidden", None)
    head = getattr(model, "head", None)
    if chunk is None or hidden is None or head is None or not getattr(model, "split_head", True):
        logits = model(input_ids)
        if temperature is not None:
            t = torch.as_tensor(temperature, dtype=torch.float32, device=logits.device)
            logits = logits.float() / (t.view(-1, 1, 1) if t.dim() else t)
        logp = _token_logprobs(logits[:, :-1], input_ids[:, 1:])
        scored = completion_mask[:, 1:].to(device=logp.device) != 0
        logp = torch.where(scored, logp, torch.zeros_like(logp))
        return F.pad(logp, (1, 0))
    if chunk <= 0:
        raise ValueError(f"chunk must be a positive number of positions, got {chunk}")
    h = hidden(input_ids)[:, :-1]
    scored = completion_mask[:, 1:].to(device=h.device) != 0
    hs = h[scored]
    targets = input_ids[:, 1:].to(h.device)[scored]
    temps = None
    if temperature is not None:
        t = torch.as_tensor(temperature, dtype=torch.float32, device=h.device)
        rows = scored.nonzero(as_tuple=True)[0]
        temps = t[rows] if t.dim() else t.expand(rows.shape[0])
    keep = torch.is_grad_enabled() and hs.requires_grad
    parts = []
    for s in range(0, hs.shape[0], chunk):
        args = (hs[s : s + chunk], targets[s : s + chunk], None if temps is None else temps[s : s + chunk])
        if keep:  # the chunk's logits are rebuilt in backward, not stored
            parts.append(checkpoint(_chunk_logprobs, head, *args, use_reentrant=False))
        else:
            parts.append(_chunk_logprobs(head, *args))
    values = torch.cat(parts) if parts else hs.new_zeros(0, dtype=torch.float32)
    out = torch.zeros(scored.shape, dtype=torch.float32, device=h.device).masked_scatter(scored, values)
    return F.pad(out, (1, 0))


def _model_max_len(model: nn.Module) -> int:
    max_len = getattr(model, "max_len", None)
    if not isinstance(max_len, int):
        raise TypeError(f"{type(model).__name__} has no int max_len attribute")
    return max_len


def _model_device(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt_ids: list[int],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    eos_id: int = 2,
) -> tuple[list[int], list[float]]:
    """Samples a completion of one prompt, token by token (the model is run in eval mode).

    Args:
        model: :class:`TinyLM` or any module mapping ids to logits with a ``max_len`` attribute.
        prompt_ids: the prompt's ids (at least one, e.g. starting with BOS).
        max_new_tokens: most tokens to generate; fewer when ``prompt + completion`` would exceed
            ``model.max_len``, or when ``eos_id`` is emitted.
        temperature: sampling temperature (> 0); ignored when ``greedy``.
        greedy: take the argmax instead of sampling.
        generator: random generator for sampling (the global one when None); its device is used to draw.
        eos_id: generation stops after this id is emitted (it is included in the completion).

    Returns:
        ``(completion ids, logprobs)``: each token's log-probability under the distribution it was drawn
        from, ``log_softmax(logits / temperature)`` (``log_softmax(logits)`` when greedy).

    Raises:
        ValueError: on an empty prompt, a prompt longer than ``model.max_len``, a negative
            ``max_new_tokens`` or a non-positive temperature when sampling.
    """
    max_len = _model_max_len(model)
    if not prompt_ids:
        raise ValueError("prompt_ids must hold at least one token")
    if len(prompt_ids) > max_len:
        raise ValueError(f"prompt of {len(prompt_ids)} tokens exceeds max_len {max_len}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 when sampling, got {temperature}")
    n_new = min(max_new_tokens, max_len - len(prompt_ids))
    device = _model_device(model)
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    completion: list[int] = []
    logprobs: list[float] = []
    was_training = model.training
    model.eval()
    try:
        for _ in range(n_new):
            logits = model(ids)[0, -1].float()
            if greedy:
                logp = torch.log_softmax(logits, dim=-1)
                token = int(torch.argmax(logp))
            else:
                logp = torch.log_softmax(logits / temperature, dim=-1)
                probs = logp.exp()
                if generator is not None:
                    probs = probs.to(generator.device)
                token = int(torch.multinomial(probs, 1, generator=generator))
            completion.append(token)
            logprobs.append(float(logp[token]))
            if token == eos_id:
                break
            ids = torch.cat([ids, ids.new_tensor([[token]])], dim=1)
    finally:
        model.train(was_training)
    return completion, logprobs


@torch.no_grad()
def greedy_batch(
    model: nn.Module, prompts: list[list[int]], *, max_new_tokens: int, eos_id: int = 2
) -> list[list[int]]:
    """Greedy completions of many prompts at once: what :func:`generate` with ``greedy=True`` gives each.

    Prompts of one length are decoded together (positions are absolute, so rows are never
    left-padded); a row that has emitted ``eos_id`` is finished (its completion ends with it).
    """
    max_len = _model_max_len(model)
    device = _model_device(model)
    out: list[list[int]] = [[] for _ in prompts]
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        if not p or len(p) > max_len:
            raise ValueError(f"prompt {i} has {len(p)} tokens; 1..{max_len} allowed")
        by_length.setdefault(len(p), []).append(i)
    was_training = model.training
    model.eval()
    try:
        for length, rows in by_length.items():
            ids = torch.tensor([prompts[i] for i in rows], dtype=torch.long, device=device)
            done = [False] * len(rows)
            for _ in range(min(max_new_tokens, max_len - length)):
                token = model(ids)[:, -1].float().argmax(dim=-1)
                for k, t in enumerate(token.tolist()):
                    if not done[k]:
                        out[rows[k]].append(int(t))
                        done[k] = t == eos_id
                if all(done):
                    break
                ids = torch.cat([ids, token[:, None]], dim=1)
    finally:
        model.train(was_training)
    return out


def select_device(prefer: str = "auto") -> torch.device:
    """Chooses the device to train on.

    Args:
        prefer: ``"auto"`` (cuda when available, else cpu), ``"cpu"``, or ``"cuda"`` / ``"cuda:N"``.

    Returns:
        The device.

    Raises:
        DeviceUnavailableError: if cuda is asked for but not available.
        ValueError: on any other string.
    """
    if prefer == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if prefer == "cpu":
        return torch.device("cpu")
    if prefer == "cuda" or prefer.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"device {prefer!r} was asked for but CUDA is not available here; use --device cpu or auto"
            )
        return torch.device(prefer)
    raise ValueError(f"unknown device {prefer!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")


def autocast(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """Mixed precision for the forward pass: bf16 autocast on cuda, nothing on cpu.

    Args:
        device: the device the model runs on.

    Returns:
        A context manager; logits still come out of :class:`TinyLM` as float32.
    """
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
