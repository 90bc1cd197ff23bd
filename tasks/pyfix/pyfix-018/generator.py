"""Generated check of pyfix-018: split_evenly(), chunk_stats(), batched(), windowed() on drawn inputs.

Each case names an input kind and its items; `call` builds the iterable freshly: sequences
(list, tuple, range, str) or one-shot iterators (generator expression, map(), iter(),
the lines of a StringIO), which the bug silently empties in split_evenly() and
chunk_stats(). Sizes and parts are always >= 1 and inputs mostly non-empty; batched()
and windowed() (not affected) are drawn too. Windows are compared as lists.
"""

KINDS_ONESHOT = ["generator", "map", "iter", "lines"]
KINDS_SEQ = ["list", "tuple", "range", "str"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _input(rng, oneshot):
    kind = rng.choice(KINDS_ONESHOT if oneshot else KINDS_SEQ)
    n = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 16, 20]) if rng.random() < 0.9 else 0
    if n == 0 and rng.random() < 0.7:
        n = rng.randint(1, 12)
    if kind == "range":
        start, step = rng.randint(-5, 5), rng.choice([1, 2, 3, -1])
        return {"kind": kind, "start": start, "stop": start + step * n, "step": step}
    if kind in ("str", "lines"):
        return {"kind": kind, "items": "".join(rng.choice(LETTERS) for _ in range(n))}
    return {"kind": kind, "items": [rng.randint(-50, 50) for _ in range(n)]}


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        oneshot = rng.random() < 0.75
        src = _input(rng, oneshot)
        if r < 0.5:
            out.append({"fn": "split_evenly", "src": src, "k": rng.randint(1, 6)})
        elif r < 0.8:
            out.append({"fn": "chunk_stats", "src": src, "k": rng.randint(1, 5)})
        elif r < 0.9:
            out.append({"fn": "batched", "src": src, "k": rng.randint(1, 5)})
        else:
            out.append({"fn": "windowed", "src": src, "k": rng.randint(1, 4)})
    return out


def _build(src):
    import io

    kind = src["kind"]
    if kind == "range":
        return range(src["start"], src["stop"], src["step"])
    items = src["items"]
    if kind == "list":
        return list(items)
    if kind == "tuple":
        return tuple(items)
    if kind == "str":
        return str(items)
    if kind == "generator":
        return (x for x in list(items))
    if kind == "map":
        return map(str, list(items))
    if kind == "iter":
        return iter(list(items))
    return io.StringIO("".join(c + "\n" for c in items))  # lines


def call(case):
    from chunkit import batched, chunk_stats, split_evenly, windowed

    data = _build(case["src"])
    k = case["k"]
    if case["fn"] == "split_evenly":
        return [list(part) for part in split_evenly(data, k)]
    if case["fn"] == "chunk_stats":
        return dict(chunk_stats(data, k))
    if case["fn"] == "batched":
        return [list(b) for b in batched(data, k)]
    return [list(w) for w in windowed(data, k)]
