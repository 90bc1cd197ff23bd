import pytest

from romankit import MAX_VALUE, from_roman, is_roman, to_roman


def test_max_value_to_roman():
    assert to_roman(3999) == "MMMCMXCIX"


def test_max_value_from_roman():
    assert from_roman("MMMCMXCIX") == 3999
    assert is_roman("mmmcmxcix")


def test_round_trip_whole_range():
    for n in range(1, MAX_VALUE + 1):
        assert from_roman(to_roman(n)) == n


def test_just_below_max():
    assert to_roman(3998) == "MMMCMXCVIII"


@pytest.mark.parametrize("bad", [0, -1, 4000, 10_000])
def test_out_of_range_rejected(bad):
    with pytest.raises(ValueError):
        to_roman(bad)


def test_four_thousand_numeral_rejected():
    with pytest.raises(ValueError):
        from_roman("MMMM")


def test_smallest_value():
    assert to_roman(1) == "I"
    assert from_roman("I") == 1


def test_type_errors():
    with pytest.raises(TypeError):
        to_roman(True)
    with pytest.raises(TypeError):
        to_roman("12")
