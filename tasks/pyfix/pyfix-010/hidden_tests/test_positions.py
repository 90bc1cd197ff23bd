import pytest

from minilex import LexError, SourceMap, tokenize


def positions(text):
    return [(t.text, t.line, t.col) for t in tokenize(text) if t.kind not in ("NEWLINE",)]


def test_lf_positions_regression():
    assert positions("a = 1\n  bb = 22") == [
        ("a", 1, 1), ("=", 1, 3), ("1", 1, 5), ("bb", 2, 3), ("=", 2, 6), ("22", 2, 8), ("", 2, 10),
    ]


def test_empty_source():
    assert [(t.kind, t.line, t.col) for t in tokenize("")] == [("EOF", 1, 1)]


def test_crlf_positions():
    assert positions("a = 1\r\nb = 2\r\n") == [
        ("a", 1, 1), ("=", 1, 3), ("1", 1, 5), ("b", 2, 1), ("=", 2, 3), ("2", 2, 5), ("", 3, 1),
    ]


def test_crlf_newline_tokens():
    newlines = [(t.line, t.col) for t in tokenize("x\r\n\r\ny\r\n") if t.kind == "NEWLINE"]
    assert newlines == [(1, 2), (2, 1), (3, 2)]


def test_crlf_error_location_and_snippet():
    with pytest.raises(LexError) as info:
        tokenize("a = 1\r\nb = 2\r\nc = $\r\n")
    err = info.value
    assert (err.line, err.col) == (3, 5)
    assert err.source_line == "c = $"
    assert str(err).splitlines()[1:] == ["c = $", "    ^"]


def test_mixed_line_endings():
    assert positions("a\r\nb\nc\r\nd") == [
        ("a", 1, 1), ("b", 2, 1), ("c", 3, 1), ("d", 4, 1), ("", 4, 2),
    ]


def test_source_map_line_text_crlf():
    sm = SourceMap("one\r\ntwo\r\nthree")
    assert [sm.line_text(n) for n in (1, 2, 3)] == ["one", "two", "three"]
    assert sm.position(5) == (2, 1)


def test_form_feed_between_blocks():
    toks = positions("a = 1\n\f\nb = 2\n")
    assert ("b", 3, 1) in toks
    assert toks[-1] == ("", 4, 1)


def test_form_feed_inside_a_line():
    assert positions("a\fb") == [("a", 1, 1), ("b", 1, 3), ("", 1, 4)]


def test_unicode_line_separators_in_string_and_comment():
    src = 'x = "p\u2028q"  # note\x0b\x1cend\ny = 2'
    toks = positions(src)
    assert toks[2] == ('"p\u2028q"', 1, 5)
    assert toks[3:] == [("y", 2, 1), ("=", 2, 3), ("2", 2, 5), ("", 2, 6)]


def test_offset_out_of_range():
    with pytest.raises(IndexError):
        SourceMap("abc").position(4)
