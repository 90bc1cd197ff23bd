"""Generated check of pyfix-011: hunk headers with an empty range (diff -U0, new/deleted files).

Four kinds of case on drawn line lists `a` and an edited copy `b` (blocks inserted,
deleted or replaced, sometimes at the top or bottom, sometimes from or to nothing):
* unified_diff(a, b, n), mostly with n=0, where pure insertions/deletions give
  empty ranges (GNU diff / difflib name them by the line before: "-3,0", "-0,0");
* parse_hunk_header() of drawn headers, with and without counts, counts of 0 included
  (answered as (start, stop) of both 0-based ranges, since empty ranges compare equal);
* apply_diff(a, <difflib.unified_diff(a, b, n, lineterm="") computed here>) == b;
* apply_diff(a, unified_diff(a, b, n)) round trips (right today, must stay right).
Not drawn: a == b (an empty diff), diffs that do not apply, a header "-0" without a count.
"""

import difflib

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "import os",
    "",
    "def f():",
    "    return 1",
    "x = 1",
    "# note",
    "}",
    "{",
]
NEW = ["x1", "x2", "new line", "    pass", "added", "TODO", "y = 2", "import sys"]


def _edit(rng, a):
    b = list(a)
    for _ in range(rng.randint(1, 2)):
        r = rng.random()
        pos = rng.choice([0, len(b)] + list(range(len(b) + 1)))
        if r < 0.45 or not b:
            b[pos:pos] = rng.sample(NEW, rng.randint(1, 3))
        elif r < 0.9:
            pos = min(pos, len(b) - 1)
            del b[pos : pos + rng.randint(1, 3)]
        else:
            pos = min(pos, len(b) - 1)
            b[pos : pos + rng.randint(1, 2)] = rng.sample(NEW, rng.randint(1, 2))
    return b


def _pair(rng):
    while True:
        r = rng.random()
        a = [rng.choice(WORDS) for _ in range(rng.randint(1, 10))]
        if r < 0.08:
            a, b = [], a
        elif r < 0.16:
            b = []
        else:
            b = _edit(rng, a)
        if a != b:
            return a, b


def _header(rng):
    def rng_part():
        count = rng.choice([0, 0, 0, 1, 2, 5, None])
        if count == 0:
            start = rng.randint(0, 40)
        else:
            start = rng.randint(1, 40)
        return str(start) if count is None else f"{start},{count}"

    tail = rng.choice(["", "", " def f():", " class A:"])
    return f"@@ -{rng_part()} +{rng_part()} @@{tail}"


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.32:
            a, b = _pair(rng)
            out.append({"fn": "unified_diff", "a": a, "b": b, "n": rng.choice([0, 0, 0, 0, 1, 3])})
        elif r < 0.54:
            out.append({"fn": "parse_hunk_header", "line": _header(rng)})
        elif r < 0.88:
            a, b = _pair(rng)
            context = rng.choice([0, 0, 0, 0, 1, 2])
            diff = list(difflib.unified_diff(a, b, "a/file", "b/file", n=context, lineterm=""))
            out.append({"fn": "apply", "a": a, "diff": diff})
        else:
            a, b = _pair(rng)
            out.append({"fn": "round_trip", "a": a, "b": b, "n": rng.choice([0, 0, 1, 3])})
    return out


def call(case):
    from linediff import apply_diff, parse_hunk_header, unified_diff

    fn = case["fn"]
    if fn == "unified_diff":
        return list(unified_diff(list(case["a"]), list(case["b"]), n=case["n"]))
    if fn == "parse_hunk_header":
        h = parse_hunk_header(case["line"])
        return (h.old.start, h.old.stop, h.new.start, h.new.stop)
    if fn == "apply":
        return list(apply_diff(list(case["a"]), list(case["diff"])))
    a = list(case["a"])
    return list(apply_diff(a, unified_diff(a, list(case["b"]), n=case["n"])))
