from qsparse import build_query, get_first, parse_qs, parse_qsl


def test_parse_qsl_order_and_plus():
    assert parse_qsl("?a=1&b=two+words&a=3") == [("a", "1"), ("b", "two words"), ("a", "3")]


def test_parse_qs_groups():
    assert parse_qs("a=1&a=2") == {"a": ["1", "2"]}


def test_get_first():
    assert get_first("page=2&page=3", "page") == "2"
    assert get_first("page=2", "size", "10") == "10"


def test_build_query():
    assert build_query({"q": "a b", "tag": ["x", "y"]}) == "q=a+b&tag=x&tag=y"
