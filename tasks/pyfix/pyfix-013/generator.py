"""Generated check of pyfix-013: merge(), gaps(), total_length() and overlaps() on drawn intervals.

Intervals have small integer endpoints, and about half of the drawn collections are
built as chains where the next interval starts exactly where one ends (the bug: closed
intervals that share an endpoint must merge), mixed with overlapping, contained, point
and disjoint ones. Inputs are Interval objects in shuffled order; results are compared
as lists of (start, end) pairs, in the sorted order the docstring promises.
"""


def _intervals(rng):
    ivs = []
    pos = rng.randint(-10, 10)
    for _ in range(rng.randint(2, 7)):
        r = rng.random()
        if r < 0.45:  # touches the previous end
            start = pos
        elif r < 0.65:  # overlaps the previous interval
            start = pos - rng.randint(1, 3)
        else:  # leaves a gap
            start = pos + rng.randint(1, 4)
        end = start + rng.choice([0, 1, 1, 2, 3, 5])
        ivs.append((start, end))
        pos = max(pos, end)
    if rng.random() < 0.3:  # a point interval sitting on an existing endpoint
        s, e = rng.choice(ivs)
        p = rng.choice([s, e])
        ivs.append((p, p))
    rng.shuffle(ivs)
    return ivs


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.5:
            out.append({"fn": "merge", "intervals": _intervals(rng)})
        elif r < 0.75:
            out.append({"fn": "gaps", "intervals": _intervals(rng)})
        elif r < 0.92:
            out.append({"fn": "total_length", "intervals": _intervals(rng)})
        else:
            a = rng.randint(0, 6)
            b = a + rng.randint(0, 4)
            c = rng.choice([b, b, a, b + 1, a - 2])
            out.append({"fn": "overlaps", "a": (a, b), "b": (c, c + rng.randint(0, 3))})
    return out


def call(case):
    from spans import Interval, gaps, merge, overlaps, total_length

    if case["fn"] == "overlaps":
        return bool(overlaps(Interval(*case["a"]), Interval(*case["b"])))
    ivs = [Interval(s, e) for s, e in case["intervals"]]
    if case["fn"] == "total_length":
        return total_length(ivs)
    fn = merge if case["fn"] == "merge" else gaps
    return [(iv.start, iv.end) for iv in fn(ivs)]
