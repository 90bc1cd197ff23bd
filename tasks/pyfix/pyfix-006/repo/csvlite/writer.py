"""CSV formatting."""


def _quote(field, delimiter, quotechar):
    text = str(field)
    if any(c in text for c in (delimiter, quotechar, "\r", "\n")):
        return quotechar + text.replace(quotechar, quotechar * 2) + quotechar
    return text


def format_row(fields, delimiter=",", quotechar='"'):
    """Format one row, quoting fields only where necessary."""
    return delimiter.join(_quote(field, delimiter, quotechar) for field in fields)


def dumps(rows, delimiter=",", quotechar='"'):
    """Format *rows* as CSV text, one line per row, ``\\n`` terminated."""
    return "".join(format_row(row, delimiter, quotechar) + "\n" for row in rows)
