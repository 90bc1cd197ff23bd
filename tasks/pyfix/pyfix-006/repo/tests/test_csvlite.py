from csvlite import dumps, format_row, parse, parse_records


def test_simple():
    assert parse("a,b\n1,2\n") == [["a", "b"], ["1", "2"]]


def test_quoted_delimiter_and_newline():
    assert parse('x,"a, b\nc"\n') == [["x", "a, b\nc"]]


def test_crlf():
    assert parse("a,b\r\n1,2\r\n") == [["a", "b"], ["1", "2"]]


def test_records():
    assert parse_records("name,age\nAda,36") == [{"name": "Ada", "age": "36"}]


def test_format_row_quotes_when_needed():
    assert format_row(["a", "b,c", 'say "hi"']) == 'a,"b,c","say ""hi"""'


def test_dumps():
    assert dumps([["a", "b"], ["1", "2"]]) == "a,b\n1,2\n"
