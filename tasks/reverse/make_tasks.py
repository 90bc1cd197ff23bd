"""Generate the ``reverse`` family: ``python tasks/reverse/make_tasks.py OUT [--train N] [--held-out M]``.

Each task asks for a random lower-case string reversed into ``answer.txt``; its hidden
``expected.txt`` holds the answer the ``answer`` judge grades against. Strings are drawn
from a seeded generator, so the same arguments always write the same tasks:
``reverse-train-NNNN`` (the training split) and ``reverse-eval-NNNN`` (held out: never
trained on, never in the warm start; :func:`strings` lets a caller exclude them).
"""

from __future__ import annotations

import argparse
import random
import shutil
import string
from pathlib import Path

HERE = Path(__file__).resolve().parent
LENGTHS = (6, 6)
"""Lengths of the generated strings (the demo's warm start sees mostly shorter ones). One length:
with 5 and 6 mixed, a warm start would now and then master one of them and not the other, and
RL would stall on the other (seed 0: 0 of 87 five-letter held-out tasks at every iteration)."""


def trivial(word: str) -> bool:
    """Whether the reversal of ``word`` is also what a null-effort answer writes (the word echoed,
    its letters sorted either way, one letter repeated): admission refuses such a task, so it is
    never drawn."""
    answer = word[::-1]
    return answer in (word, "".join(sorted(word)), "".join(sorted(word, reverse=True))) or len(set(word)) == 1


def strings(n: int, lengths: tuple[int, int], *, seed: int, exclude: set[str] | None = None) -> list[str]:
    """``n`` distinct random strings with lengths in ``lengths`` (inclusive), none in ``exclude``
    and none :func:`trivial`."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out: list[str] = []
    while len(out) < n:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(*lengths)))
        if w not in seen and not trivial(w):
            seen.add(w)
            out.append(w)
    return out


def splits(train: int, held_out: int, *, seed: int = 0) -> dict[str, list[str]]:
    """The strings of each split (disjoint)."""
    ev = strings(held_out, LENGTHS, seed=seed * 2 + 1)
    tr = strings(train, LENGTHS, seed=seed * 2 + 2, exclude=set(ev))
    return {"train": tr, "eval": ev}


def write_family(out: Path, *, train: int, held_out: int, seed: int = 0) -> list[Path]:
    """Write the family under ``out`` (replacing what a previous run wrote); return the task dirs."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copy(HERE / "family.yaml", out / "family.yaml")
    dirs = []
    for split, words in splits(train, held_out, seed=seed).items():
        for i, word in enumerate(words, 1):
            tid = f"reverse-{split}-{i:04d}"
            d = out / tid
            (d / "repo").mkdir(parents=True)
            (d / "hidden").mkdir()
            (d / "task.yaml").write_text(
                f"id: {tid}\nfamily: reverse\nversion: 1\nsplit: {split}\n"
                f"tier: {'medium' if len(word) < 6 else 'hard'}\n"
                f"title: Reverse {word}\ninstruction: 'Write \"{word}\" reversed into answer.txt.'\n"
            )
            (d / "repo" / "README.md").write_text("Write your answer to answer.txt in this directory.\n")
            (d / "hidden" / "expected.txt").write_text(word[::-1] + "\n")
            (d / "solution.sh").write_text(f"printf '%s\\n' {word[::-1]} > answer.txt\n")
            dirs.append(d)
    return dirs


def main() -> None:
    """The command line: write the family where it is told."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--train", type=int, default=128)
    ap.add_argument("--held-out", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    n = len(write_family(a.out, train=a.train, held_out=a.held_out, seed=a.seed))
    print(f"{n} tasks under {a.out}")


if __name__ == "__main__":
    main()
