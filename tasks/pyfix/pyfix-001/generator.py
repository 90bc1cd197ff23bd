"""Generated check of pyfix-001: slugify() and unique_slug() with drawn texts and separators.

Texts mix words, accents, digits and punctuation (often at the ends, where the bug
shows); separators are runs of characters that are not letters or digits, so the
issue's promise (no separator at either end, whichever separator) is unambiguous.
A length limit is only combined with one-character separators, where the docstring
says exactly where the cut falls.
"""

WORDS = [
    "hello",
    "world",
    "draft",
    "report",
    "Q3",
    "2024",
    "budget",
    "Crème",
    "brûlée",
    "naïve",
    "café",
    "data",
    "API",
    "v2",
    "release",
    "notes",
    "über",
    "straße",
    "fix",
    "TODO",
    "alpha",
    "beta",
    "x",
]
GLUE = [" ", "  ", ", ", " - ", "/", ": ", "!", "? ", " & ", "...", "_", "(", ") ", "'", "--", "*"]
EDGES = ["", "", "!", "?", "(", ")", "  ", "--", "...", "¡", "#", "*", " (", "'", "_", "-"]
SINGLE = ["-", "_", ".", "~", "+", "="]
MULTI = ["__", "--", "-_", "::", "..", "~~"]


def _text(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 5))]
    out = words[0]
    for w in words[1:]:
        out += rng.choice(GLUE) + w
    return rng.choice(EDGES) + out + rng.choice(EDGES)


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        text = _text(rng)
        if r < 0.45:
            out.append({"fn": "slugify", "text": text, "separator": rng.choice(SINGLE)})
        elif r < 0.6:
            out.append({"fn": "slugify", "text": text, "separator": rng.choice(MULTI)})
        elif r < 0.8:
            out.append(
                {
                    "fn": "slugify",
                    "text": text,
                    "separator": rng.choice(SINGLE),
                    "max_length": rng.randint(2, 24),
                }
            )
        else:
            sep = rng.choice(SINGLE)
            plain = sep.join(w.lower() for w in text.split() if w.isalnum())
            existing = sorted({plain, plain + sep + "2", "x", rng.choice(WORDS).lower()})
            out.append({"fn": "unique_slug", "text": text, "separator": sep, "existing": existing})
    return out


def call(case):
    from slugkit import slugify, unique_slug

    if case["fn"] == "unique_slug":
        return unique_slug(case["text"], set(case["existing"]), separator=case["separator"])
    return slugify(case["text"], separator=case["separator"], max_length=case.get("max_length"))
