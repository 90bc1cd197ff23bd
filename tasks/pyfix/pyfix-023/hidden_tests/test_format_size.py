import pytest

from bytewise import format_size, parse_size


def test_bytes_below_one_kib():
    assert format_size(512) == "512 B"
    assert format_size(1023) == "1023 B"


def test_exactly_one_kib():
    assert format_size(1024) == "1.0 KiB"


def test_fractional_kib():
    assert format_size(1536) == "1.5 KiB"


def test_just_below_one_mib_stays_in_kib():
    assert format_size(1023 * 1024) == "1023.0 KiB"


def test_ten_gib():
    assert format_size(10 * 1024 ** 3) == "10.0 GiB"


@pytest.mark.parametrize("text, expected", [
    ("3 MiB", "3.0 MiB"),
    ("7.5 GiB", "7.5 GiB"),
    ("2 TiB", "2.0 TiB"),
])
def test_parse_then_format_round_trip(text, expected):
    assert format_size(parse_size(text)) == expected


def test_negative_sizes():
    assert format_size(-2 * 1024 ** 2) == "-2.0 MiB"


def test_precision_argument():
    assert format_size(1024 ** 2 + 512 * 1024, precision=2) == "1.50 MiB"
