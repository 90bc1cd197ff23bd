"""Generated check of pyfix-010: token / error positions and SourceMap with CRLF, form feeds and
other characters that str.splitlines() (but not the README) treats as line breaks.

Sources are lines of the README's language (names, numbers, strings, operators,
comments) ended by "\\n" or "\\r\\n", with form feeds between tokens or as page-separator
lines, and strings/comments holding \\x0b, \\x1c, \\x85, \\u2028 and friends. Some hold
a character that starts no token (LexError: its line, column, source line and message).
About half of the sources use only "\\n" and no such character, which the untouched
package already handles. SourceMap cases ask position() for drawn offsets and
line_text() for every line ("\\n" count + 1 lines).
Not drawn: a lone "\\r" (the README does not say how line_text() treats it), out-of-range
offsets and lines, SourceMap.line_count (undocumented).
"""

NAMES = ["a", "b", "x", "name", "total_2", "_tmp", "Foo"]
NUMBERS = ["1", "22", "3.14", "0", "1000"]
OPS = ["=", "+", "-", "*", "(", ")", "==", "<=", ",", ":", "[", "]", "."]
ODD = ["\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x0c"]
BAD = ["$", "@", "?", "!", "`", "~", "\u00e9"]


def _string(rng, odd):
    inner = rng.choice(["p", "hello", "a b", "", 'say \\"hi\\"', "tab\\t"])
    if odd:
        i = rng.choice([j for j in range(len(inner) + 1) if not inner[:j].endswith("\\")])
        inner = inner[:i] + rng.choice(ODD) + inner[i:]
    return '"' + inner + '"'


def _line(rng, odd, bad):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(NAMES))
        elif r < 0.55:
            parts.append(rng.choice(NUMBERS))
        elif r < 0.85:
            parts.append(rng.choice(OPS))
        else:
            parts.append(_string(rng, odd and rng.random() < 0.5))
    if bad:
        parts.insert(rng.randint(0, len(parts)), rng.choice(BAD))
    seps = [" ", " ", "  ", "\t"] + (["\f", " \f "] if odd else [])
    text = rng.choice(["", "", "  ", "\t"])
    for i, p in enumerate(parts):
        text += (rng.choice(seps) if i else "") + p
    if rng.random() < 0.25:
        comment = "# " + rng.choice(["note", "todo", "x = 1", ""])
        if odd and rng.random() < 0.6:
            comment += rng.choice(ODD) + "more"
        text += rng.choice(["  ", " "]) + comment
    return text


def _source(rng, bad_ok=True):
    crlf = rng.random() < 0.45
    odd = rng.random() < 0.3
    lines = []
    k = rng.randint(2, 6)
    bad_at = rng.randrange(k) if bad_ok and rng.random() < 0.3 else -1
    for i in range(k):
        if odd and rng.random() < 0.25:
            lines.append(rng.choice(["\f", "", "\f\f"]))
        elif rng.random() < 0.1:
            lines.append("")
        lines.append(_line(rng, odd, i == bad_at))
    text = ""
    for i, line in enumerate(lines):
        text += line
        if i < len(lines) - 1 or rng.random() < 0.6:
            text += "\r\n" if crlf and (rng.random() < 0.85) else "\n"
    return text


def cases(rng, n):
    out = []
    for _ in range(n):
        if rng.random() < 0.7:
            out.append({"fn": "tokenize", "text": _source(rng)})
        else:
            text = _source(rng, bad_ok=False)
            offsets = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(3, 8))))
            out.append({"fn": "sourcemap", "text": text, "offsets": offsets, "lines": text.count("\n") + 1})
    return out


def call(case):
    from minilex import LexError, SourceMap, tokenize

    text = case["text"]
    if case["fn"] == "sourcemap":
        sm = SourceMap(text)
        return {
            "positions": [tuple(sm.position(o)) for o in case["offsets"]],
            "lines": [sm.line_text(n) for n in range(1, case["lines"] + 1)],
        }
    try:
        tokens = tokenize(text)
    except LexError as err:
        return ("LexError", err.line, err.col, err.source_line, str(err))
    return [(t.kind, t.text, t.offset, t.line, t.col) for t in tokens]
