from pathlib import Path

import pytest

EXPECTED = 'niart'


def _answer():
    p = Path("answer.txt")
    return p.read_text().rstrip("\n") if p.exists() else ""


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
