import pytest

from minilex import LexError, SourceMap, tokenize


def kinds(text):
    return [(t.kind, t.text) for t in tokenize(text)]


def test_kinds():
    assert kinds('x = 3.5 * f(y, "s\\"q")') == [
        ("NAME", "x"), ("OP", "="), ("NUMBER", "3.5"), ("OP", "*"), ("NAME", "f"),
        ("OP", "("), ("NAME", "y"), ("OP", ","), ("STRING", '"s\\"q"'), ("OP", ")"), ("EOF", ""),
    ]


def test_positions_lf():
    toks = tokenize("a = 1\n  bb = 22\n")
    assert [(t.text, t.line, t.col) for t in toks if t.kind != "NEWLINE"] == [
        ("a", 1, 1), ("=", 1, 3), ("1", 1, 5), ("bb", 2, 3), ("=", 2, 6), ("22", 2, 8), ("", 3, 1),
    ]


def test_error_message():
    with pytest.raises(LexError) as info:
        tokenize("ok = 1\nbad = $\n")
    assert (info.value.line, info.value.col) == (2, 7)
    assert str(info.value).endswith("bad = $\n      ^")


def test_source_map_line_text():
    sm = SourceMap("one\ntwo\n")
    assert sm.line_text(2) == "two"
    assert sm.position(4) == (2, 1)
