import pytest

from verscmp import compare, satisfies, sort_versions


def test_trailing_zeros_are_ignored():
    assert compare("1.2", "1.2.0") == 0
    assert compare("v2", "2.0.0") == 0


def test_simple_ordering():
    assert compare("1.3", "1.2.9") == 1
    assert compare("0.9", "1.0") == -1


def test_constraints():
    assert satisfies("1.4", ">=1.2, <2")
    assert not satisfies("2.0", ">=1.2, <2")


def test_invalid_version():
    with pytest.raises(ValueError):
        compare("1.x", "1.0")


def test_sort():
    assert sort_versions(["1.2", "1.0", "1.1"]) == ["1.0", "1.1", "1.2"]
