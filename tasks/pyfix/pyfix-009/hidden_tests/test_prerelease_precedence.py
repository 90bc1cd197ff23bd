from semverlib import compare, latest, parse, sort_versions

SPEC_ORDER = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
]


def test_spec_example_order():
    assert sort_versions(list(reversed(SPEC_ORDER))) == SPEC_ORDER


def test_spec_example_pairwise():
    for lower, higher in zip(SPEC_ORDER, SPEC_ORDER[1:]):
        assert compare(lower, higher) == -1
        assert compare(higher, lower) == 1


def test_latest_release_candidate():
    assert latest(["2.0.0-rc.9", "2.0.0-rc.10"], include_prerelease=True) == "2.0.0-rc.10"


def test_purely_numeric_prerelease():
    assert sort_versions(["1.0.0-10", "1.0.0-9", "1.0.0-100"]) == ["1.0.0-9", "1.0.0-10", "1.0.0-100"]


def test_numeric_identifier_lower_than_alphanumeric():
    assert compare("1.0.0-rc.1", "1.0.0-rc.final") == -1
    assert compare("1.0.0-rc.final", "1.0.0-rc.20") == 1
    assert compare("1.0.0-2", "1.0.0-a") == -1


def test_hyphenated_identifier_compared_per_identifier():
    assert compare("1.0.0-alpha.1", "1.0.0-alpha-2") == -1


def test_more_identifiers_win_when_prefix_equal():
    assert compare("1.0.0-alpha", "1.0.0-alpha.0") == -1
    assert compare("1.0.0-alpha.1.2", "1.0.0-alpha.1") == 1


def test_mixed_list_sorts_without_error():
    versions = ["1.0.0-x.7.z.92", "1.0.0-x.7.z", "1.0.0-x.10", "1.0.0-x.7.10", "1.0.0-x.y"]
    assert sort_versions(versions) == [
        "1.0.0-x.7.10",
        "1.0.0-x.7.z",
        "1.0.0-x.7.z.92",
        "1.0.0-x.10",
        "1.0.0-x.y",
    ]


def test_build_metadata_ignored_and_sort_stable():
    assert compare("1.0.0-rc.1+b2", "1.0.0-rc.1+b1") == 0
    items = ["1.0.0+b", "1.0.0-rc.2", "1.0.0+a"]
    assert sort_versions(items) == ["1.0.0-rc.2", "1.0.0+b", "1.0.0+a"]


def test_release_beats_prerelease_and_core_numeric():
    assert compare("1.0.0", "1.0.0-rc.99") == 1
    assert compare("1.0.1-alpha", "1.0.0") == 1
    assert latest(["1.9.0", "1.10.0-rc.1", "1.10.0"]) == "1.10.0"


def test_accepts_version_objects():
    v = parse("v3.0.0-beta.10")
    assert sort_versions([v, "3.0.0-beta.9"]) == ["3.0.0-beta.9", v]
