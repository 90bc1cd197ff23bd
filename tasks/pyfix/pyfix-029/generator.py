"""Generated check of pyfix-029: the last bin is closed on the right (numpy's convention).

Ranges and bin widths are drawn so that every edge is an exact binary fraction (integer
low end, width a multiple of 0.25), and samples are multiples of 0.25 or values with at
most three decimals, so that which bin a sample on an edge falls into is fixed by the
docstring alone, not by floating point accidents. Cases: histogram() with the range taken
from the data (its maximum lies on the upper edge), histogram() with an explicit range
and samples on its upper limit, below and above it, all-equal samples (range widened by
0.5, which the buggy code already handles), and bin_index() on edges built by
linear_edges().
"""


def _grid(rng):
    lo = rng.randint(-5, 20)
    bins = rng.randint(1, 6)
    width = 0.25 * rng.randint(1, 8)
    return lo, lo + bins * width, bins


def _inside(rng, lo, hi):
    if rng.random() < 0.6:
        return lo + 0.25 * rng.randint(0, int(round((hi - lo) * 4)))
    return round(rng.uniform(lo, hi), 3)


def _outside(rng, lo, hi):
    if rng.random() < 0.5:
        return lo - rng.choice([0.001, 0.25, 1, 3.5])
    return hi + rng.choice([0.001, 0.25, 1, 3.5])


def cases(rng, n):
    out = []
    for _ in range(n):
        lo, hi, bins = _grid(rng)
        r = rng.random()
        if r < 0.28:
            # range from the data: both ends present
            values = [lo, hi] + [_inside(rng, lo, hi) for _ in range(rng.randint(0, 8))]
            values += [hi] * rng.randint(0, 2)
            rng.shuffle(values)
            out.append({"fn": "histogram", "values": values, "bins": bins})
        elif r < 0.36:
            v = rng.choice([lo, hi, 7, 0.5])
            out.append(
                {"fn": "histogram", "values": [v] * rng.randint(1, 4), "bins": rng.choice([1, 2, 3, 4])}
            )
        elif r < 0.8:
            values = [_inside(rng, lo, hi) for _ in range(rng.randint(1, 8))]
            values += [_outside(rng, lo, hi) for _ in range(rng.randint(0, 2))]
            if rng.random() < 0.45:
                values += [hi] * rng.randint(1, 2)
            rng.shuffle(values)
            out.append({"fn": "histogram", "values": values, "bins": bins, "range": [lo, hi]})
        else:
            p = rng.random()
            if p < 0.35:
                x = hi
            elif p < 0.8:
                x = _inside(rng, lo, hi)
            else:
                x = _outside(rng, lo, hi)
            out.append({"fn": "bin_index", "x": x, "lo": lo, "hi": hi, "bins": bins})
    return out


def call(case):
    import binhist

    if case["fn"] == "bin_index":
        edges = binhist.linear_edges(case["lo"], case["hi"], case["bins"])
        return binhist.bin_index(case["x"], edges)
    values = list(case["values"])
    if "range" in case:
        counts, edges = binhist.histogram(values, bins=case["bins"], range=tuple(case["range"]))
    else:
        counts, edges = binhist.histogram(values, bins=case["bins"])
    return [list(counts), [round(e, 9) for e in edges]]
