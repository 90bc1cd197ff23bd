"""CSV parsing."""


class CSVError(ValueError):
    """Raised for malformed CSV input."""


def parse(text, delimiter=",", quotechar='"'):
    """Parse *text* and return a list of rows (lists of strings)."""
    rows = []
    row = []
    field = []
    in_quotes = False
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if in_quotes:
            if char == quotechar:
                in_quotes = False
            else:
                field.append(char)
        elif char == quotechar:
            in_quotes = True
        elif char == delimiter:
            row.append("".join(field))
            field = []
        elif char in "\r\n":
            if char == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
            row.append("".join(field))
            rows.append(row)
            row, field = [], []
        else:
            field.append(char)
        i += 1
    if in_quotes:
        raise CSVError("unterminated quoted field")
    if field or row:
        row.append("".join(field))
        rows.append(row)
    return rows


def parse_records(text, delimiter=",", quotechar='"'):
    """Parse *text* whose first row is a header; return a list of dicts."""
    rows = parse(text, delimiter, quotechar)
    if not rows:
        return []
    header, *body = rows
    records = []
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise CSVError(f"row {number} has {len(row)} fields, expected {len(header)}")
        records.append(dict(zip(header, row)))
    return records
