import pytest

from romankit import from_roman, is_roman, to_roman


@pytest.mark.parametrize(
    "value, numeral",
    [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (40, "XL"), (1994, "MCMXCIV"), (2024, "MMXXIV")],
)
def test_known_values(value, numeral):
    assert to_roman(value) == numeral
    assert from_roman(numeral) == value


def test_lowercase_accepted():
    assert from_roman("mcmxciv") == 1994


def test_non_canonical_rejected():
    assert not is_roman("IIII")
    assert not is_roman("IC")
