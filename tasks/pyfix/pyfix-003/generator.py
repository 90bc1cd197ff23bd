"""Generated check of pyfix-003: render_inline() and render() on lines with several links.

Lines are built from the README's inline constructs: words (some with characters that
need HTML escaping), links `[text](url)`, parenthesised remarks, code spans (whose
contents are left alone) and bold/italic words. A share of lines holds one link and no
later ")" (the untouched package renders those right); the others hold several links,
adjacent links, or a link followed later by text in parentheses (the bug).
Only unambiguous inputs are drawn: URLs hold no parentheses, spaces, "*", "`" or
brackets; link texts hold no brackets; emphasis never spans a link; no line starts
with "#"; render_inline() input holds no newline.
"""

WORDS = [
    "see",
    "read",
    "the",
    "docs",
    "and",
    "or",
    "then",
    "Tom",
    "Jerry",
    "note",
    "this",
    "page",
    "more",
    "at",
    "v2",
    "2024",
    "Q&A",
    "a<b",
    "x>y",
    "&",
    "AT&T",
    "ok,",
    "well:",
    "done.",
]
LINK_TEXT = [
    "docs",
    "faq",
    "home",
    "here",
    "the guide",
    "API",
    "Tom & Jerry",
    "a<b>",
    "v1.2",
    "**go**",
    "*this*",
    "step 1",
    "next page",
    "x",
]
URLS = [
    "/docs",
    "/faq",
    "/",
    "https://example.com/docs",
    "https://example.com/a/b?x=1",
    "#top",
    "/s?a=1&b=2",
    "mailto:me@example.org",
    "../up.html",
    "/x_y-z",
    "1",
    "2",
    '/q?s="x"',
    "https://h.example/path/to/page.html#sec-2",
    "/a&b",
    "/tags/c++",
]
REMARKS = [
    "(opens in a new tab)",
    "(see above)",
    "(2)",
    "(optional)",
    "(PDF, 2 MB)",
    "(beta)",
    "(a & b)",
    "(x < y)",
]
CODES = ["`[a](b)`", "`f(x)`", "`*p`", "`a & b`", "`[x](/y) (z)`", "`**not bold**`", "`(c)`"]
EMPH = ["**bold**", "*italic*", "**very** *much*", "*one*", "**two words**"]


def _link(rng):
    return f"[{rng.choice(LINK_TEXT)}]({rng.choice(URLS)})"


def _words(rng, k):
    return " ".join(rng.choice(WORDS) for _ in range(k))


def _line(rng, buggy):
    """A line; with buggy=False exactly one link and nothing parenthesised after it."""
    if not buggy:
        before = [
            rng.choice(
                [_words(rng, rng.randint(1, 3)), rng.choice(CODES), rng.choice(EMPH), rng.choice(REMARKS)]
            )
            for _ in range(rng.randint(0, 2))
        ]
        after = [
            rng.choice([_words(rng, rng.randint(1, 3)), rng.choice(EMPH)]) for _ in range(rng.randint(0, 2))
        ]
        if not before and not after:
            after = [_words(rng, 2)]
        return " ".join(before + [_link(rng)] + after)
    kind = rng.randrange(4)
    parts = [_words(rng, rng.randint(0, 2))]
    if kind == 0:  # several links separated by text
        for i in range(rng.randint(2, 4)):
            if i:
                parts.append(
                    rng.choice(
                        [
                            "and",
                            "or",
                            ",",
                            "|",
                            _words(rng, 2),
                            rng.choice(EMPH),
                            rng.choice(CODES),
                            rng.choice(REMARKS),
                        ]
                    )
                )
            parts.append(_link(rng))
    elif kind == 1:  # adjacent links
        parts.append("".join(_link(rng) for _ in range(rng.randint(2, 3))))
    elif kind == 2:  # one link, later a parenthesised remark
        parts += [_link(rng), _words(rng, rng.randint(0, 2)), rng.choice(REMARKS)]
    else:  # a link inside parentheses, or a link then a code span with parentheses
        if rng.random() < 0.5:
            parts.append("(" + _words(rng, 1) + " " + _link(rng) + ")")
        else:
            parts += [_link(rng), rng.choice(["`f(x)`", "`[x](/y) (z)`", "`(c)`"])]
    parts.append(_words(rng, rng.randint(0, 2)))
    return " ".join(p for p in parts if p)


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.7:
            out.append({"fn": "render_inline", "text": _line(rng, rng.random() < 0.5)})
        else:
            blocks = []
            for b in range(rng.randint(1, 2)):
                if b == 0 and rng.random() < 0.5:
                    blocks.append("#" * rng.randint(1, 6) + " " + _line(rng, rng.random() < 0.4))
                else:
                    blocks.append("\n".join(_line(rng, rng.random() < 0.3) for _ in range(rng.randint(1, 2))))
            out.append({"fn": "render", "text": "\n\n".join(blocks)})
    return out


def call(case):
    from mdlite import render, render_inline

    if case["fn"] == "render":
        return render(case["text"])
    return render_inline(case["text"])
