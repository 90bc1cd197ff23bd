import pytest

from bytewise import format_size, parse_size


def test_small_values_are_plain_bytes():
    assert format_size(0) == "0 B"
    assert format_size(1023) == "1023 B"


def test_parse_iec_units():
    assert parse_size("1 KiB") == 1024
    assert parse_size("2MiB") == 2 * 1024 ** 2
    assert parse_size("1.5 gib") == int(1.5 * 1024 ** 3)


def test_parse_short_forms_and_plain_numbers():
    assert parse_size("10k") == 10 * 1024
    assert parse_size("42") == 42


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse_size("ten megs")
    with pytest.raises(ValueError):
        parse_size("5 XB")
