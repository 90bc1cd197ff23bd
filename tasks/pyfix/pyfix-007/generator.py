"""Generated check of pyfix-007: add_stopwords() must only change the stop-words of its own counter.

Each case is a short scenario played on fresh objects: one to three WordCounters built
with the default stop-words, a caller's set (possibly shared by several counters), or
another iterable (list, tuple, generator, frozenset), then a drawn sequence of
add_stopwords(), feed(), reset(), most_common() and top_words() calls. The answer is
what every most_common()/top_words() call returned, plus the caller's sets afterwards
(the README: add_stopwords() extends the list "of that counter only"; the issue: the
caller's set is not modified, any iterable works).
Stop-words given to the constructor are lower-case (case-folding them is unspecified).
`call` restores the module's DEFAULT_STOPWORDS after each case, so that a leaking
package cannot carry one case's stop-words into another case.
"""

VOCAB = [
    "python",
    "java",
    "rust",
    "kotlin",
    "cat",
    "hat",
    "owl",
    "mat",
    "sat",
    "don't",
    "end",
    "data",
    "go",
    "x",
    "zeta",
    "café",
    "naïve",
]
STOP = ["the", "and", "a", "of", "is", "it", "to", "in"]
SPECS = ["default", "default", "default", "set", "set", "list", "tuple", "gen", "frozenset"]


def _text(rng):
    words = []
    for _ in range(rng.randint(3, 9)):
        w = rng.choice(VOCAB if rng.random() < 0.75 else STOP)
        if rng.random() < 0.2:
            w = w.capitalize()
        elif rng.random() < 0.05:
            w = w.upper()
        words.append(w)
    out = words[0]
    for w in words[1:]:
        out += rng.choice([" ", " ", ", ", ". ", " - ", " 42 ", "! "]) + w
    return out


def _spec(rng):
    kind = rng.choice(SPECS)
    if kind == "default":
        return {"kind": "default"}
    if kind == "set":
        return {"kind": "set", "set": rng.randrange(2)}
    return {"kind": kind, "words": sorted(rng.sample(VOCAB + STOP, rng.randint(0, 3)))}


def cases(rng, n):
    out = []
    for _ in range(n):
        sets = [sorted(rng.sample(VOCAB + STOP, rng.randint(0, 3))) for _ in range(2)]
        counters = [
            dict(_spec(rng), min_length=rng.choice([1, 1, 1, 2, 3])) for _ in range(rng.randint(1, 3))
        ]
        steps = []
        for _ in range(rng.randint(2, 6)):
            r = rng.random()
            i = rng.randrange(len(counters))
            if r < 0.35:
                words = [rng.choice(VOCAB) for _ in range(rng.randint(1, 2))]
                steps.append(
                    {
                        "op": "add",
                        "i": i,
                        "words": [w.capitalize() if rng.random() < 0.2 else w for w in words],
                    }
                )
            elif r < 0.65:
                steps.append({"op": "feed", "i": i, "text": _text(rng)})
            elif r < 0.72:
                steps.append({"op": "reset", "i": i})
            elif r < 0.82:
                steps.append({"op": "most_common", "i": i, "n": rng.choice([None, 1, 2, 3])})
            else:
                steps.append(
                    {
                        "op": "top_words",
                        "text": _text(rng),
                        "n": rng.choice([10, 2, 3]),
                        "spec": _spec(rng),
                        "min_length": rng.choice([1, 1, 2]),
                    }
                )
        # the last word: every counter feeds one more text and reports
        for i in range(len(counters)):
            steps.append({"op": "feed", "i": i, "text": _text(rng)})
            steps.append({"op": "most_common", "i": i, "n": None})
        out.append({"sets": sets, "counters": counters, "steps": steps})
    return out


def call(case):
    import wordfreq
    from wordfreq import WordCounter, top_words

    defaults = wordfreq.DEFAULT_STOPWORDS
    saved = set(defaults) if isinstance(defaults, set) else None
    try:
        sets = [set(words) for words in case["sets"]]

        def stopwords(spec):
            kind = spec["kind"]
            if kind == "default":
                return None
            if kind == "set":
                return sets[spec["set"]]
            words = spec["words"]
            if kind == "list":
                return list(words)
            if kind == "tuple":
                return tuple(words)
            if kind == "frozenset":
                return frozenset(words)
            return (w for w in words)

        counters = [WordCounter(stopwords(c), min_length=c["min_length"]) for c in case["counters"]]
        seen = []
        for step in case["steps"]:
            op = step["op"]
            if op == "add":
                counters[step["i"]].add_stopwords(*step["words"])
            elif op == "feed":
                counters[step["i"]].feed(step["text"])
            elif op == "reset":
                counters[step["i"]].reset()
            elif op == "most_common":
                seen.append([tuple(p) for p in counters[step["i"]].most_common(step["n"])])
            else:
                result = top_words(step["text"], step["n"], stopwords(step["spec"]), step["min_length"])
                seen.append([tuple(p) for p in result])
        return {"results": seen, "sets_after": [sorted(s) for s in sets]}
    finally:
        if saved is not None and defaults != saved:
            defaults.clear()
            defaults.update(saved)
