import pytest

from semverlib import InvalidVersion, compare, latest, parse, sort_versions


def test_parse_fields():
    v = parse("v1.4.0-rc.1+build.7")
    assert (v.major, v.minor, v.patch, v.prerelease, v.build) == (1, 4, 0, "rc.1", "build.7")
    assert str(v) == "1.4.0-rc.1+build.7"


@pytest.mark.parametrize("bad", ["1.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0+"])
def test_invalid(bad):
    with pytest.raises(InvalidVersion):
        parse(bad)


def test_numeric_core_ordering():
    assert sort_versions(["1.10.0", "1.2.0", "1.2.0-beta"]) == ["1.2.0-beta", "1.2.0", "1.10.0"]


def test_prerelease_before_release():
    assert compare("1.0.0-alpha", "1.0.0") == -1


def test_latest():
    assert latest(["1.0.0", "1.1.0-rc.1"]) == "1.0.0"
    assert latest(["1.0.0", "1.1.0-rc.1"], include_prerelease=True) == "1.1.0-rc.1"
