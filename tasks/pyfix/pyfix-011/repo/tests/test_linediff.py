import pytest

from linediff import PatchError, apply_diff, opcodes, parse_hunk_header, unified_diff

CASES = [
    (["a", "b", "c"], ["a", "B", "c", "d"]),
    (list("abcdefghij"), list("abXdefghiYj")),
    (["x", "y"], ["y"]),
    (["one", "two", "three", "four"], ["one", "two", "2.5", "three", "four"]),
    ([], []),
]


def test_readme_example():
    assert unified_diff(["a", "b", "c"], ["a", "B", "c", "d"], "old.txt", "new.txt") == [
        "--- old.txt",
        "+++ new.txt",
        "@@ -1,3 +1,4 @@",
        " a",
        "-b",
        "+B",
        " c",
        "+d",
    ]


def test_opcodes():
    assert opcodes(["a", "b", "c"], ["a", "c", "d"]) == [
        ("equal", 0, 1, 0, 1),
        ("delete", 1, 2, 1, 1),
        ("equal", 2, 3, 1, 2),
        ("insert", 3, 3, 2, 3),
    ]


def test_identical_inputs_give_empty_diff():
    assert unified_diff(["same"], ["same"]) == []


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("a, b", CASES)
def test_round_trip(a, b, n):
    assert apply_diff(a, unified_diff(a, b, n=n)) == b


def test_single_line_header():
    header = parse_hunk_header("@@ -5 +6 @@")
    assert (header.old, header.new) == (range(4, 5), range(5, 6))


def test_context_mismatch_is_rejected():
    diff = unified_diff(["a", "b"], ["a", "c"])
    with pytest.raises(PatchError):
        apply_diff(["z", "b"], diff)
