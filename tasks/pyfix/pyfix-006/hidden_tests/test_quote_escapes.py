import csv
import io

import pytest

from csvlite import CSVError, dumps, parse, parse_records


def test_doubled_quotes_inside_field():
    assert parse('id,comment\n1,"she said ""hi"" to me"\n') == [
        ["id", "comment"],
        ["1", 'she said "hi" to me'],
    ]


def test_field_that_is_a_single_quote():
    assert parse('"""",x') == [['"', "x"]]


def test_empty_quoted_field():
    assert parse('a,"",b\n') == [["a", "", "b"]]


def test_escaped_quote_next_to_delimiter():
    assert parse('"x"",y",z\n') == [['x",y', "z"]]


def test_round_trip_through_dumps():
    rows = [["plain", 'in "quotes"', '"', 'a,"b"\nc', ""], ['12" pipe', "x"]]
    assert parse(dumps(rows)) == rows


def test_custom_quotechar():
    assert parse("a;'it''s';b", delimiter=";", quotechar="'") == [["a", "it's", "b"]]


def test_parse_records_with_quotes():
    text = 'name,quote\nAda,"""That brain of mine is something more than merely mortal"""\n'
    assert parse_records(text) == [
        {"name": "Ada", "quote": '"That brain of mine is something more than merely mortal"'}
    ]


def test_matches_stdlib_csv():
    text = 'a,"b ""c"" d",e\r\n"x\r\ny",,"z"""\r\n'
    expected = list(csv.reader(io.StringIO(text, newline="")))
    assert parse(text) == expected


def test_unterminated_quote_raises():
    with pytest.raises(CSVError):
        parse('a,"b\n')


def test_trailing_empty_field():
    assert parse("a,b,\n") == [["a", "b", ""]]
