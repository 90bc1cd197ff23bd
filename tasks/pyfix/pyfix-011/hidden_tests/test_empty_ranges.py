import difflib

from linediff import apply_diff, parse_hunk_header, unified_diff

OLD = ["alpha", "beta", "gamma", "delta", "epsilon"]
NEW_INSERT = ["alpha", "beta", "gamma", "x1", "x2", "delta", "epsilon"]
NEW_DELETE = ["alpha", "beta", "epsilon"]


def reference(a, b, n):
    return list(difflib.unified_diff(a, b, "a", "b", lineterm="", n=n))


def span(r):
    # empty ranges compare equal to each other, so compare the bounds
    return (r.start, r.stop)


def test_zero_context_insertion_header():
    assert unified_diff(OLD, NEW_INSERT, n=0) == [
        "--- a",
        "+++ b",
        "@@ -3,0 +4,2 @@",
        "+x1",
        "+x2",
    ]


def test_zero_context_deletion_header():
    assert unified_diff(OLD, NEW_DELETE, n=0) == [
        "--- a",
        "+++ b",
        "@@ -3,2 +2,0 @@",
        "-gamma",
        "-delta",
    ]


def test_insertion_at_top_and_bottom_with_zero_context():
    a, b = ["m"], ["top", "m", "bottom"]
    assert unified_diff(a, b, n=0) == reference(a, b, 0)
    assert [l for l in unified_diff(a, b, n=0) if l.startswith("@@")] == [
        "@@ -0,0 +1 @@",
        "@@ -1,0 +3 @@",
    ]


def test_new_file_and_deleted_file():
    assert unified_diff([], ["x", "y"])[2] == "@@ -0,0 +1,2 @@"
    assert unified_diff(["x", "y"], [])[2] == "@@ -1,2 +0,0 @@"


def test_matches_difflib():
    pairs = [
        (OLD, NEW_INSERT),
        (OLD, NEW_DELETE),
        (list("abcdefghijklmnop"), list("abcXdefghijklYmnop")),
        (["a", "b", "c"], ["a", "B", "c", "d"]),
    ]
    for n in (0, 1, 3):
        for a, b in pairs:
            assert unified_diff(a, b, n=n) == reference(a, b, n)


def test_parse_empty_old_range():
    header = parse_hunk_header("@@ -3,0 +4,2 @@")
    assert span(header.old) == (3, 3)
    assert span(header.new) == (3, 5)


def test_parse_empty_ranges_at_file_start():
    header = parse_hunk_header("@@ -0,0 +1,3 @@")
    assert (span(header.old), span(header.new)) == ((0, 0), (0, 3))
    header = parse_hunk_header("@@ -1,2 +0,0 @@")
    assert (span(header.old), span(header.new)) == ((0, 2), (0, 0))
    assert span(parse_hunk_header("@@ -7,3 +6,0 @@").new) == (6, 6)


def test_parse_non_empty_ranges():
    assert parse_hunk_header("@@ -5 +5 @@") == parse_hunk_header("@@ -5,1 +5,1 @@")
    header = parse_hunk_header("@@ -10,4 +12,6 @@ def f():")
    assert (header.old, header.new) == (range(9, 13), range(11, 17))


def test_apply_zero_context_diff_from_difflib():
    for b in (NEW_INSERT, NEW_DELETE, ["start"] + OLD + ["end"]):
        assert apply_diff(OLD, reference(OLD, b, 0)) == b


def test_apply_gnu_style_new_file():
    diff = ["--- /dev/null", "+++ b/notes.txt", "@@ -0,0 +1,2 @@", "+first", "+second"]
    assert apply_diff([], diff) == ["first", "second"]


def test_round_trip_still_works():
    for n in (0, 2):
        for b in (NEW_INSERT, NEW_DELETE, [], ["only"], OLD[::-1]):
            assert apply_diff(OLD, unified_diff(OLD, b, n=n)) == b
            assert apply_diff(b, unified_diff(b, OLD, n=n)) == OLD


def test_context_hunks_unchanged():
    a = [f"line {i}" for i in range(1, 21)]
    b = a[:4] + ["new 5"] + a[5:15] + ["extra"] + a[15:]
    headers = [l for l in unified_diff(a, b) if l.startswith("@@")]
    assert headers == ["@@ -2,7 +2,7 @@", "@@ -13,6 +13,7 @@"]
    assert unified_diff(a, list(a)) == []
