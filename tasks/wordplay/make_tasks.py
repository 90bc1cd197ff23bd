"""Generate the wordplay family: `python tasks/wordplay/make_tasks.py` (deterministic).

Each task asks for a word reversed into answer.txt. The hidden tests give
partial credit (one lower-case word written, length, each letter in place, exact answer), so
the judge's score is a dense reward. Tasks 001-036 are the training split of
the demo, 037-048 the held-out split it evaluates on.
"""

from pathlib import Path

WORDS = """
sun tree bird fish moon star
stone plant river cloud light table chair bread water music paper green
house mouse horse smile night dream train sugar apple lemon beach
candle garden rocket silver window honey quiet
rain snow
storm field frost flame glass heart pearl
forest bottle planet
""".split()

ROOT = Path(__file__).resolve().parent
TEST = '''from pathlib import Path

import pytest

EXPECTED = {expected!r}


def _answer():
    p = Path("answer.txt")
    return p.read_text().rstrip("\\n") if p.exists() else ""


def test_answer_is_one_word():
    # an empty or junk file is not a step towards the answer
    assert _answer().isalpha() and _answer().islower()


def test_same_length():
    assert len(_answer()) == len(EXPECTED)


@pytest.mark.parametrize("position", range(len(EXPECTED)))
def test_letter_at_position(position):
    assert _answer()[position : position + 1] == EXPECTED[position]


def test_exact_answer():
    assert _answer() == EXPECTED
'''


def main() -> None:
    assert len(WORDS) == 48 and len(set(WORDS)) == 48, len(WORDS)
    for i, word in enumerate(WORDS, 1):
        tid = f"wordplay-{i:03d}"
        d = ROOT / tid
        (d / "repo").mkdir(parents=True, exist_ok=True)
        (d / "hidden_tests").mkdir(exist_ok=True)
        tier = "easy" if len(word) <= 4 else "medium" if len(word) == 5 else "hard"
        (d / "task.yaml").write_text(
            f"id: {tid}\nfamily: wordplay\nversion: 2\ntier: {tier}\n"
            f"title: Reverse the word {word}\n"
            f"instruction: 'Write \"{word}\" reversed into answer.txt.'\n"
        )
        (d / "repo" / "README.md").write_text("Write your answer to answer.txt in this directory.\n")
        (d / "hidden_tests" / "test_answer.py").write_text(TEST.format(expected=word[::-1]))
        (d / "solution.sh").write_text(f"printf '%s\\n' {word[::-1]} > answer.txt\n")


if __name__ == "__main__":
    main()
