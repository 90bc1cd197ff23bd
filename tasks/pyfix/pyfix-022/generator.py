"""Generated check of pyfix-022: Trie under drawn insert / remove sequences, compared as a set of words.

A case is a fresh Trie (from drawn initial words) and a sequence of insert() and remove()
calls; removals are of stored words, of strings with no path in the trie, and (the bug)
of strings that are only a prefix of stored words, or that extend a stored word. Every
call's result is recorded, then len(), `in`, count_prefix(), words_with_prefix() and
longest_prefix_of() for drawn strings. In some cases every removal is of a stored word
or of a string off every path, which the untouched package handles right.
"""


def _word(rng, alphabet, lo=1, hi=5):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def cases(rng, n):
    out = []
    for _ in range(n):
        alphabet = rng.choice(["ab", "abc", "abcd", "rst"])
        tricky = rng.random() < 0.72
        init = sorted({_word(rng, alphabet, 1, 6) for _ in range(rng.randint(3, 9))})
        if rng.random() < 0.1:
            init.append("")
        model = set(init)
        ops = []
        for _ in range(rng.randint(4, 12)):
            r = rng.random()
            prefixes = {w[:i] for w in model for i in range(len(w) + 1)}
            inner = sorted(p for p in prefixes if p not in model)  # on a path, not stored
            if r < 0.35:
                w = _word(rng, alphabet, 0 if rng.random() < 0.05 else 1, 6)
                if model and rng.random() < 0.2:
                    w = rng.choice(sorted(model))  # already present
                ops.append(["insert", w])
                model.add(w)
            elif r < 0.65 and model:
                w = rng.choice(sorted(model))
                ops.append(["remove", w])
                model.discard(w)
            elif tricky and inner and r < 0.85:
                ops.append(["remove", rng.choice(inner)])
            elif tricky and model and r < 0.92:
                ops.append(["remove", rng.choice(sorted(model)) + rng.choice(alphabet)])
            else:
                w = _word(rng, alphabet) + "z"  # off every path
                if rng.random() < 0.5:
                    w = "z" + w
                ops.append(["remove", w])
        queries = [_word(rng, alphabet, 0, 3) for _ in range(3)]
        texts = [_word(rng, alphabet, 2, 8) for _ in range(2)]
        probes = sorted(set(init) | {op[1] for op in ops})[:12]
        out.append({"init": init, "ops": ops, "prefixes": queries, "texts": texts, "probes": probes})
    return out


def call(case):
    from prefixtree import Trie

    t = Trie(case["init"])
    results = []
    for kind, word in case["ops"]:
        results.append(bool(t.insert(word) if kind == "insert" else t.remove(word)))
    return {
        "results": results,
        "len": len(t),
        "all": list(t.words_with_prefix("")),
        "in": [w in t for w in case["probes"]],
        "count": [t.count_prefix(p) for p in case["prefixes"]],
        "with": [list(t.words_with_prefix(p)) for p in case["prefixes"]],
        "longest": [t.longest_prefix_of(x) for x in case["texts"]],
    }
