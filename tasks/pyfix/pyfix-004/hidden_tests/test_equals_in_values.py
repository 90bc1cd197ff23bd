from urllib.parse import parse_qs as std_parse_qs

from qsparse import build_query, get_first, parse_qs, parse_qsl


def test_base64_padding_kept():
    assert parse_qs("state=xyz&token=YWJjZA==") == {"state": ["xyz"], "token": ["YWJjZA=="]}


def test_nested_query_in_value():
    assert parse_qsl("next=/search?q=a=b&page=2") == [("next", "/search?q=a=b"), ("page", "2")]


def test_get_first_with_equals():
    assert get_first("sig=a=b=c", "sig") == "a=b=c"


def test_value_that_is_only_equals_signs():
    assert parse_qsl("k==") == [("k", "=")]


def test_matches_stdlib():
    query = "a=1&b=x=y&c=%3D&d=p+q&a=2"
    assert parse_qs(query) == std_parse_qs(query)


def test_round_trip_with_special_characters():
    params = {"redirect": "https://h/?x=1&y=2", "sig": "ab==", "q": "a b"}
    assert {k: v[0] for k, v in parse_qs(build_query(params)).items()} == params


def test_blank_values_dropped_by_default():
    assert parse_qs("a=&b&c=1") == {"c": ["1"]}
    assert parse_qs("a=&b&c=1", keep_blank_values=True) == {"a": [""], "b": [""], "c": ["1"]}


def test_leading_question_mark_and_empty_chunks():
    assert parse_qsl("?a=1&&b=2&") == [("a", "1"), ("b", "2")]
