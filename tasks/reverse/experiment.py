"""The reverse family's learning experiment: warm-start data, greedy evaluation, RL settings.

The warm start's data and stopping rule, the greedy evaluation, and the settings of the RL
iterations. ``trajlake demo`` and ``bench/learner.py --parts curves`` both run this experiment; it lives beside the
family's generator (``make_tasks.py``) because it is about these tasks, not about the platform.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Any

WARM_LENGTHS = (3, 4)
"""Lengths of most warm-start strings; the tasks' strings are longer (``make_tasks.LENGTHS``)."""
WARM_LONG_FRACTION = 0.05
"""Share of warm-start strings with the tasks' length (a first grip, no more)."""
WARM_STOP_SUCCESS = 0.20
"""The warm start stops once it solves this share of the long validation strings greedily."""
WARM_CHECK_EVERY = 5
"""Warm-start steps between two checks of that rule (often: at lr 2e-3 the share can jump from
under 10% to over 40% within 25 steps, and a start that strong leaves RL little to show)."""
ITERATIONS = 4
"""RL iterations of the demo (the final evaluation comes after the last)."""
TASKS_PER_ITERATION = 128
"""Training tasks each iteration acts on (drawn in turn from the training split)."""
TRAIN_TASKS = 256
"""The training split: an iteration takes the next ``TASKS_PER_ITERATION`` of them, so each is
acted on about twice in four iterations (the held-out split is never acted on or trained on)."""
GROUP_SIZE = 8
"""Attempts per training task and iteration (G)."""
TRAIN_TEMPERATURE = 0.7
"""The temperature training rollouts sample at (the learner scores them at the same one)."""
REFILL_ROUNDS = 2
"""Times an iteration replaces its constant-reward groups with fresh tasks."""
RL_HYPERPARAMETERS: dict[str, Any] = {
    "epochs": 4,
    "batch_size": 32,
    "lr": 6e-4,
    "clip_eps": 0.2,
    "kl_coef": 0.0,
    # a fresh Adam moves every weight by ~lr in its first steps, whatever the gradient: without
    # the ramp the first update undid the warm start (27.5% -> 11% greedy, seed 0 in-process)
    "lr_warmup_steps": 128,
}


def prompt_of(word: str) -> str:
    """The instruction of the reverse task for ``word``, as the policy reads it."""
    return f'Write "{word}" reversed into answer.txt.\n'


def warm_data(
    exclude: set[str],
    lengths: tuple[int, int],
    *,
    n: int = 4000,
    seed: int = 0,
    long_fraction: float | None = None,
) -> tuple[list[tuple[str, str]], list[str]]:
    """Warm-start pairs (mostly short strings) and 100 long validation strings, none in ``exclude``."""
    rng = random.Random(seed)
    seen = set(exclude)

    def draw(k: int, lo: int, hi: int) -> list[str]:
        out: list[str] = []
        while len(out) < k:
            w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi)))
            if w not in seen:
                seen.add(w)
                out.append(w)
        return out

    n_long = int(n * (WARM_LONG_FRACTION if long_fraction is None else long_fraction))
    words = draw(n - n_long, *WARM_LENGTHS) + draw(n_long, *lengths)
    rng.shuffle(words)
    return [(prompt_of(w), w[::-1]) for w in words], draw(100, *lengths)


def greedy_success(model: Any, words: Sequence[str]) -> float:
    """Share of ``words`` the model reverses exactly, greedily (the warm start's stopping rule)."""
    from learners.tokenizer import CharTokenizer
    from learners.torch_model import greedy_batch

    tok = CharTokenizer()
    outs = greedy_batch(model, [[tok.BOS, *tok.encode(prompt_of(w))] for w in words], max_new_tokens=24,
                        eos_id=tok.EOS)  # fmt: skip
    return sum(tok.decode(ids).rstrip("\n") == w[::-1] for ids, w in zip(outs, words, strict=True)) / len(
        words
    )
