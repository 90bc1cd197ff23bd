"""Generate the wordplay family: `python tasks/wordplay/make_tasks.py` (deterministic).

Each task asks for a word reversed into answer.txt; its hidden ``expected.txt`` holds the
answer the ``answer`` judge grades against, with partial credit for progress only (the
correct prefix beyond what a null-effort answer reaches: see ``judges/builtin/answer.py``).
Tasks 001-036 are a training split, 037-048 a held-out one. No word's answer may be one of
its own null-effort answers (sorted, echoed...): "tree" (reversed "eert", its letters
sorted) was replaced by "wind".
"""

import shutil
from pathlib import Path

WORDS = """
sun wind bird fish moon star
stone plant river cloud light table chair bread water music paper green
house mouse horse smile night dream train sugar apple lemon beach
candle garden rocket silver window honey quiet
rain snow
storm field frost flame glass heart pearl
forest bottle planet
""".split()

ROOT = Path(__file__).resolve().parent


def main() -> None:
    assert len(WORDS) == 48 and len(set(WORDS)) == 48, len(WORDS)
    for i, word in enumerate(WORDS, 1):
        tid = f"wordplay-{i:03d}"
        d = ROOT / tid
        if d.exists():
            shutil.rmtree(d)
        (d / "repo").mkdir(parents=True)
        (d / "hidden_tests").mkdir()
        tier = "easy" if len(word) <= 4 else "medium" if len(word) == 5 else "hard"
        (d / "task.yaml").write_text(
            f"id: {tid}\nfamily: wordplay\nversion: 3\ntier: {tier}\n"
            f"title: Reverse the word {word}\n"
            f"instruction: 'Write \"{word}\" reversed into answer.txt.'\n"
        )
        (d / "repo" / "README.md").write_text("Write your answer to answer.txt in this directory.\n")
        (d / "hidden_tests" / "expected.txt").write_text(word[::-1] + "\n")
        (d / "solution.sh").write_text(f"printf '%s\\n' {word[::-1]} > answer.txt\n")


if __name__ == "__main__":
    main()
