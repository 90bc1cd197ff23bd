from verscmp import compare, max_version, satisfies, sort_versions


def test_two_digit_minor_is_newer():
    assert compare("1.10.0", "1.9.4") == 1
    assert compare("1.9.4", "1.10.0") == -1


def test_multi_digit_major():
    assert compare("10.0", "9.99.99") == 1


def test_leading_zeros_are_numeric():
    assert compare("1.02", "1.2") == 0


def test_trailing_zeros_still_equal():
    assert compare("1.10", "1.10.0.0") == 0


def test_max_version_with_double_digits():
    assert max_version(["1.9.4", "1.10.0", "1.2"]) == "1.10.0"


def test_sort_versions_numeric_order():
    versions = ["1.10", "1.2", "1.9", "1.1", "2.0", "1.100"]
    assert sort_versions(versions) == ["1.1", "1.2", "1.9", "1.10", "1.100", "2.0"]


def test_satisfies_with_double_digits():
    assert satisfies("2.10", ">=2.9")
    assert not satisfies("2.10", "<2.9")


def test_single_digit_comparisons_unchanged():
    assert compare("1.3", "1.2.9") == 1
    assert satisfies("1.4", ">=1.2, <2")
    assert not satisfies("2.0", "!=2")
