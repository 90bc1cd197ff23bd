"""Generated check of pyfix-002: to_roman() / from_roman() / is_roman() around the top of the range.

The documented range is 1..3999 (README, docstring, error message); the bug rejects
exactly 3999, so many cases name 3999 or its numeral (in any letter case, which the
docstring allows) and many walk a short run of values across the upper bound.
Others convert ordinary values in range, out-of-range values (ValueError, as the issue
says), non-canonical numerals (ValueError, per the docstring) and wrong types
(TypeError), which the untouched package already gets right.
Leading/trailing whitespace is never drawn: the package strips it, but nothing documents it.
"""

_NUMERALS = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
]

# non-canonical or invalid numerals: every one must be rejected with ValueError
BAD = [
    "MMMM",
    "MMMMCMXCIX",
    "IIII",
    "IC",
    "VV",
    "XXXX",
    "MMMCMXCIXI",
    "IM",
    "MMMCCCC",
    "LL",
    "DD",
    "VX",
    "MMMCMXCVIIII",
    "IIX",
    "MMXM",
    "ABC",
    "MMMCMXC9",
    "XIIII",
]


def _roman(n):
    out = []
    for value, symbol in _NUMERALS:
        count, n = divmod(n, value)
        out.append(symbol * count)
    return "".join(out)


def _case(rng, text):
    mode = rng.randrange(3)
    if mode == 0:
        return text
    if mode == 1:
        return text.lower()
    return "".join(c.lower() if rng.random() < 0.5 else c for c in text)


def _numeral(rng):
    r = rng.random()
    if r < 0.55:
        return _case(rng, "MMMCMXCIX")  # 3999
    if r < 0.8:
        return _case(rng, _roman(rng.choice([rng.randint(1, 3998), rng.randint(3980, 3998)])))
    return _case(rng, rng.choice(BAD))


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.3:
            x = rng.random()
            if x < 0.5:
                value = 3999
            elif x < 0.75:
                value = rng.choice([rng.randint(1, 3998), rng.randint(3900, 3998)])
            elif x < 0.92:
                value = rng.choice([0, -1, 4000, 4001, rng.randint(4000, 100000), -rng.randint(2, 5000)])
            else:
                value = rng.choice([True, False, 3999.0, "3999", None, [3999]])
            out.append({"fn": "to_roman", "n": value})
        elif r < 0.55:
            out.append({"fn": "from_roman", "numeral": _numeral(rng)})
        elif r < 0.7:
            out.append({"fn": "is_roman", "numeral": _numeral(rng)})
        else:
            lo = rng.randint(3975, 4001)
            out.append({"fn": "run", "lo": lo, "hi": lo + rng.randint(1, 12)})
    return out


def call(case):
    from romankit import from_roman, is_roman, to_roman

    fn = case["fn"]
    if fn == "to_roman":
        return to_roman(case["n"])
    if fn == "from_roman":
        return from_roman(case["numeral"])
    if fn == "is_roman":
        result = is_roman(case["numeral"])
        return ("bool", result) if isinstance(result, bool) else ("not a bool", repr(result))
    # a run of consecutive values: each converted and parsed back, or rejected
    out = []
    for n in range(case["lo"], case["hi"] + 1):
        try:
            numeral = to_roman(n)
        except ValueError:
            out.append((n, "ValueError"))
            continue
        try:
            back = from_roman(numeral)
        except ValueError:
            back = "ValueError"
        out.append((n, numeral, back))
    return out
