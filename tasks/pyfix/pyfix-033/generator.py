"""Generated check of pyfix-033: merged RunningStats equal single-pass statistics.

Each case draws shards of values (ints or two-decimal floats, different means, sometimes
shards with the same mean or an empty shard, where the buggy formula happens to be right)
and merges them: a + b, a chain of update() calls, a pairwise tree of +, a.update(b)
(which must return a and leave b alone) or GroupedStats built per worker and merged.
Results are (n, mean, variance, sample_variance, stdev, min, max) of the merged
accumulator, or the GroupedStats summary plus per-key variances; floats are compared
with a relative tolerance of 1e-9 (the merge formula may be written differently).
"""


def _shard(rng, center=None):
    size = rng.randint(1, 7)
    if center is None:
        center = rng.randint(-20, 120)
    spread = rng.choice([1, 3, 10, 25])
    if rng.random() < 0.5:
        return [center + rng.randint(-spread, spread) for _ in range(size)]
    return [round(center + rng.uniform(-spread, spread), 2) for _ in range(size)]


def _same_mean_shard(rng, mean):
    out = [mean] * rng.randint(0, 1)
    for _ in range(rng.randint(1, 3)):
        k = rng.randint(1, 15)
        out += [mean - k, mean + k]
    rng.shuffle(out)
    return out


def _shards(rng, count):
    r = rng.random()
    if r < 0.35:
        mean = rng.randint(-10, 100)
        return [_same_mean_shard(rng, mean) for _ in range(count)]
    shards = [_shard(rng) for _ in range(count)]
    if r < 0.45:
        shards[rng.randrange(count)] = []  # an empty shard; the others are not empty
    return shards


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.3:
            out.append({"fn": "add", "shards": _shards(rng, 2)})
        elif r < 0.5:
            out.append({"fn": "chain", "shards": _shards(rng, rng.randint(2, 6))})
        elif r < 0.65:
            out.append({"fn": "tree", "shards": _shards(rng, rng.randint(3, 6))})
        elif r < 0.75:
            out.append({"fn": "update", "shards": _shards(rng, 2)})
        else:
            workers = []
            keys = rng.sample(["/a", "/b", "/c", "/login", "/search"], rng.randint(1, 3))
            centers = {k: rng.randint(0, 200) for k in keys}
            balanced = rng.random() < 0.4  # every worker's values of a key have the same mean
            for _ in range(rng.randint(2, 3)):
                pairs = []
                for k in keys:
                    if balanced:
                        pairs += [[k, v] for v in _same_mean_shard(rng, centers[k])]
                    elif rng.random() < 0.8:
                        shift = rng.choice([0, 0, 5, 20, -15])
                        pairs += [[k, v] for v in _shard(rng, centers[k] + shift)]
                rng.shuffle(pairs)
                workers.append(pairs)
            if not any(workers):
                workers[0] = [[keys[0], 1.0]]
            out.append({"fn": "grouped", "workers": workers})
    return out


def _stats(s):
    return [s.n, s.mean, s.variance, s.sample_variance, s.stdev, s.min, s.max]


def call(case):
    from streamstats import GroupedStats, RunningStats

    fn = case["fn"]
    if fn == "grouped":
        workers = [GroupedStats.from_pairs([tuple(p) for p in w]) for w in case["workers"]]
        g = workers[0]
        for other in workers[1:]:
            g.merge(other)
        summary = g.summary()
        return [summary, {k: [g[k].variance, g[k].sample_variance] for k in sorted(summary)}]
    parts = [RunningStats.from_values(s) for s in case["shards"]]
    if fn == "add":
        return _stats(parts[0] + parts[1])
    if fn == "chain":
        total = RunningStats()
        for p in parts:
            total.update(p)
        return _stats(total)
    if fn == "tree":
        while len(parts) > 1:
            parts = [
                parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)
            ]
        return _stats(parts[0])
    a, b = parts
    before = _stats(b)
    returned = a.update(b)
    return [returned is a, _stats(a), _stats(b) == before]


def same(expected, actual):
    """Equal, with floats compared to a relative 1e-9 (absolute 1e-9 near zero)."""
    import math

    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(expected) == len(actual)
            and all(same(e, a) for e, a in zip(expected, actual))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and sorted(expected) == sorted(actual)
            and all(same(expected[k], actual[k]) for k in expected)
        )
    return type(expected) is type(actual) and expected == actual
