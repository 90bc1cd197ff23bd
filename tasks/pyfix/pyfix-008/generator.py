"""Generated check of pyfix-008: loads() keeps "#" and ";" that are part of a value.

Each case is an INI text drawn from the README's syntax: an optional default section,
[section] headers, `key = value` / `key: value` lines, full-line comments (also
indented), blank lines, indented continuation lines, and inline comments that start
with "#" or ";" preceded by spaces or tabs. About half of the texts have a value (or
continuation) holding a "#" or ";" not preceded by whitespace, which the untouched
package cuts; the answer is the whole parsed dict, sometimes with get_int()/get_bool().
Not drawn (README and issue leave them open): an inline comment right after an empty
value or a value beginning with ";", continuation lines of an empty value, whitespace
other than spaces and tabs before a comment.
"""

PLAIN = [
    "example.org",
    "8080",
    "yes",
    "no",
    "Welcome to",
    "/srv/app",
    "a b c",
    "42",
    "on",
    "3.14",
    "user@example.org",
    "off",
    "true",
    "demo",
    "x-y_z",
    "C:/tmp",
    "1",
    "0",
    "hello world",
]
MARKED = [
    "#ff8800",
    "https://example.org/docs#install",
    "s3cr;et",
    "release#42",
    "a#b;c",
    "C#",
    "f(x);g(x)",
    "http://x/a#top",
    "item#2",
    "50%;",
    "x;y;z",
    "p@ss#word!",
    "#",
    "#1",
    "a;",
    "k=v;w",
    "#fff;#000",
    "a#",
    "tag:v1#rc",
]
CONT_PLAIN = ["the machine", "second line", "more text", "and so on", "80"]
CONT_MARKED = ["item#2", "step;2", "#3 is next", "x#y", "last;"]
COMMENTS = ["# http", "; where to send users", "#", ";", "# a#b;c", "; TODO: fix", "#comment"]
KEYS = [
    "host",
    "port",
    "debug",
    "motd",
    "color",
    "link",
    "password",
    "tag",
    "expr",
    "Root",
    "Name",
    "url",
    "items",
    "Mode",
]
SECTIONS = ["server", "theme", "db", "paths", "list", "a b", "x"]


def _value(rng, marked):
    return rng.choice(MARKED if marked else PLAIN)


def _ws(rng):
    return rng.choice([" ", "  ", "\t", " \t", "   "])


def cases(rng, n):
    out = []
    for _ in range(n):
        buggy = rng.random() < 0.55
        lines = []
        options = []  # (key, value) pairs of the text
        sections = rng.sample(SECTIONS, rng.randint(1, 3))
        if rng.random() < 0.3:
            sections = [""] + sections
        slots = []
        for s in sections:
            keys = rng.sample(KEYS, rng.randint(1, 3))
            slots += [(s, k) for k in keys]
        marked_slot = rng.randrange(len(slots)) if buggy else -1
        current = None
        for idx, (s, key) in enumerate(slots):
            if s != current:
                if s:
                    lines.append(rng.choice(["[{}]", "[ {} ]", "[{}]"]).format(s))
                current = s
            if rng.random() < 0.2:
                lines.append(
                    rng.choice(
                        ["", "# note", "; global settings", "  # indented comment", "\t; tabbed comment"]
                    )
                )
            marked = idx == marked_slot
            cont_marked = False
            if marked and rng.random() < 0.2:  # the marker sits in a continuation line instead
                marked, cont_marked = False, True
            value = _value(rng, marked)
            if rng.random() < 0.05 and not marked:
                value = ""
            sep = rng.choice([" = ", "=", ": ", " : ", " =  "])
            line = key + sep + value
            if value and rng.random() < 0.4:
                line += _ws(rng) + rng.choice(COMMENTS)
            lines.append(line)
            if value and (cont_marked or rng.random() < 0.15):
                for _ in range(rng.randint(1, 2)):
                    cont = rng.choice(CONT_MARKED if cont_marked else CONT_PLAIN)
                    cont_line = rng.choice(["    ", "\t", "  "]) + cont
                    if rng.random() < 0.3:
                        cont_line += _ws(rng) + rng.choice(COMMENTS)
                    lines.append(cont_line)
            options.append((s, key.lower()))
        case = {"text": "\n".join(lines) + rng.choice(["", "\n"])}
        r = rng.random()
        if r < 0.15:
            s, key = rng.choice(options)
            case["get"] = ("int", s, key)
        elif r < 0.3:
            s, key = rng.choice(options)
            case["get"] = ("bool", s, key)
        out.append(case)
    return out


def call(case):
    from iniparse import get_bool, get_int, loads

    cfg = loads(case["text"])
    plain = {str(s): {str(k): v for k, v in opts.items()} for s, opts in cfg.items()}
    if "get" not in case:
        return plain
    kind, section, key = case["get"]
    fn = get_int if kind == "int" else get_bool
    try:
        got = ("value", fn(cfg, section, key, "missing"))
    except ValueError:  # ConfigError is a ValueError, as is int()'s complaint
        got = ("ValueError",)
    return plain, got
