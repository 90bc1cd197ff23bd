"""Generated check of pyfix-028: deep_merge / load never modify their inputs and return an
independent result.

Each case is 1-4 drawn configuration layers (JSON-like: dicts with string keys, scalars,
lists of scalars; overlapping keys so that nested dicts get merged). call() builds the
layers afresh, merges them with deep_merge(*layers) or load(*overrides, defaults=base)
(never the module's global DEFAULTS, so no case leaves state behind) and reports:
the merged value, whether the layers are unchanged after the merge, whether they are still
unchanged after every dict / list inside the result has been modified, and whether the
result is unchanged after every dict / list inside the layers has been modified.
Some cases hold only top-level scalars, which the buggy code already handles.
"""

import copy

KEYS = [
    "server",
    "db",
    "pool",
    "size",
    "host",
    "port",
    "features",
    "tags",
    "cache",
    "ttl",
    "debug",
    "url",
    "timeout",
    "retries",
    "hosts",
    "log",
]
SCALARS = [0, 1, 5, 20, 8000, "x", "127.0.0.1", "sqlite:///a.db", True, False, None, 0.5, ""]


def _scalar(rng):
    return rng.choice(SCALARS)


def _value(rng, depth, flat):
    r = rng.random()
    if flat or depth >= 3 or r < 0.4:
        return _scalar(rng)
    if r < 0.6:
        return [_scalar(rng) for _ in range(rng.randint(0, 3))]
    return _tree(rng, depth + 1, flat)


def _tree(rng, depth=0, flat=False):
    size = rng.randint(1, 4) if depth else rng.randint(1, 5)
    keys = rng.sample(KEYS[:10] if depth else KEYS, size)
    return {k: _value(rng, depth, flat) for k in keys}


def cases(rng, n):
    out = []
    for _ in range(n):
        flat = rng.random() < 0.4
        layers = [_tree(rng, flat=flat) for _ in range(rng.choice([1, 2, 2, 2, 3, 3, 4]))]
        fn = "deep_merge" if rng.random() < 0.7 else "load"
        out.append({"fn": fn, "layers": layers})
    return out


def _containers(obj, found):
    if isinstance(obj, (dict, list)):
        if all(c is not obj for c in found):
            found.append(obj)
        for v in obj.values() if isinstance(obj, dict) else obj:
            _containers(v, found)
    return found


def _poke(objs):
    found = []
    for obj in objs:
        _containers(obj, found)
    for c in found:
        if isinstance(c, dict):
            c["__poked__"] = 1
        else:
            c.append("__poked__")


def call(case):
    import layercfg

    def merge(layers):
        if case["fn"] == "load":
            return layercfg.load(*layers[1:], defaults=layers[0])
        return layercfg.deep_merge(*layers)

    layers = copy.deepcopy(case["layers"])
    snapshot = copy.deepcopy(layers)
    result = merge(layers)
    merged = copy.deepcopy(result)
    kept_by_merge = layers == snapshot
    _poke([result])
    kept_by_result_edit = layers == snapshot

    layers = copy.deepcopy(case["layers"])
    result = merge(layers)
    before = copy.deepcopy(result)
    _poke(layers)
    result_kept = result == before
    return [merged, kept_by_merge, kept_by_result_edit, result_kept]
