"""Generated check of pyfix-006: parse() / parse_records() on quoted fields with doubled quotes.

The generator draws rows of fields and writes them as CSV text itself, following the
README's rules: fields separated by the delimiter, rows by "\\n" or "\\r\\n" (the last one
optionally unterminated), a field enclosed in the quote character when it holds the
delimiter, the quote character or a line break (and sometimes when it does not need
it), the quote character inside written twice. The expected answer is the rows
themselves; the reference parses them back. About half of the cases have some field
containing the quote character (the bug); the rest parse right today. A few texts end
inside a quoted field (CSVError). Custom delimiters/quote characters are drawn too.
Not drawn (unspecified): a quote character inside an unquoted field, empty rows.
"""

PLAIN = [
    "a",
    "b",
    "id",
    "name",
    "Ada",
    "36",
    "x y",
    "hello world",
    "",
    "3.14",
    "café",
    "-",
    "end",
    "O'Brien",
    'say "x"',
    "tab\there",
    "semi;colon",
    "pipe|bar",
    "comma, here",
    "two\nlines",
    "crlf\r\nline",
    "  spaced  ",
]
QUOTED = [
    'she said "hi" to me',
    '"',
    '""',
    '12" pipe',
    'a,"b"\nc',
    '"start',
    'end"',
    'x",y',
    'It\'s "fine"',
    '"""',
    "it's",
    "'quoted'",
    "''",
    "rock 'n' roll",
    "a'b'c'd",
]
DIALECTS = [(",", '"'), (",", '"'), (",", '"'), (";", "'"), ("\t", '"'), ("|", "'"), (",", "'"), (";", '"')]


def _field(rng, quotechar, want_quote):
    pool = [f for f in QUOTED if quotechar in f] if want_quote else [f for f in PLAIN if quotechar not in f]
    return rng.choice(pool)


def _write(rng, rows, delimiter, quotechar):
    out = []
    for r, row in enumerate(rows):
        cells = []
        for field in row:
            needs = any(c in field for c in (delimiter, quotechar, "\r", "\n"))
            if needs or rng.random() < 0.15:
                cells.append(quotechar + field.replace(quotechar, quotechar * 2) + quotechar)
            else:
                cells.append(field)
        out.append(delimiter.join(cells))
    terminator = rng.choice(["\n", "\r\n"])
    text = terminator.join(out)
    if rng.random() < 0.7:
        text += terminator
    return text


def cases(rng, n):
    out = []
    for _ in range(n):
        delimiter, quotechar = rng.choice(DIALECTS)
        buggy = rng.random() < 0.55
        width = rng.randint(1, 4)
        height = rng.randint(1, 4)
        cells = [(r, c) for r in range(height) for c in range(width)]
        quoted = set(rng.sample(cells, rng.randint(1, min(3, len(cells))))) if buggy else set()
        rows = [[_field(rng, quotechar, (r, c) in quoted) for c in range(width)] for r in range(height)]
        for row in rows:  # no row that is a single empty field (an empty line)
            if row == [""]:
                row[0] = "z"
        r = rng.random()
        if r < 0.06:
            text = _write(rng, rows, delimiter, quotechar)
            text = text.rstrip("\r\n") + delimiter + quotechar + "unterminated" + rng.choice(["", "\n"])
            out.append({"fn": "parse", "text": text, "delimiter": delimiter, "quotechar": quotechar})
        elif r < 0.75:
            out.append(
                {
                    "fn": "parse",
                    "text": _write(rng, rows, delimiter, quotechar),
                    "delimiter": delimiter,
                    "quotechar": quotechar,
                }
            )
        else:
            header = rng.sample(["id", "name", "comment", "quote", "city", "note"], width)
            if buggy and rng.random() < 0.3:
                header[rng.randrange(width)] = rng.choice(['say "x"', "it's", '"q"'])
            text = _write(rng, [header] + rows, delimiter, quotechar)
            out.append({"fn": "parse_records", "text": text, "delimiter": delimiter, "quotechar": quotechar})
    return out


def call(case):
    from csvlite import parse, parse_records

    fn = parse_records if case["fn"] == "parse_records" else parse
    result = fn(case["text"], delimiter=case["delimiter"], quotechar=case["quotechar"])
    if case["fn"] == "parse_records":
        return [sorted(record.items()) for record in result]
    return [list(row) for row in result]
