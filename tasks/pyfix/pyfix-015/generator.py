"""Generated check of pyfix-015: LRUCache and @memoize driven by drawn sequences of operations.

A cache case is a fresh LRUCache(capacity) and a sequence of put / get (hits and misses, with
or without a default) / peek / `in` / pop / len calls over a few keys more than the capacity,
so that evictions happen after reads (the bug: get() must refresh a key). Every call's result
is recorded, then keys() (least to most recently used), hits and misses. A memoize case calls
a decorated function with drawn positional arguments, some of them hot, and records results,
how often the function really ran per argument, and the cache's size/hits/misses (not its
keys, whose form is internal).
"""

KEYS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "n", "p"]


def _cache_case(rng, reads):
    cap = rng.randint(2, 5)
    keys = KEYS[: cap + rng.randint(2, 5)]
    ops = [["put", k, rng.randint(0, 99)] for k in rng.sample(keys, cap)]
    held = [op[1] for op in ops]  # keys in the cache, least recent first (reference view)
    for _ in range(rng.randint(5, 12)):
        r = rng.random()
        absent = [k for k in keys if k not in held]
        if reads and held and r < 0.35:  # read a key that is present, preferably an old one
            k = held[0] if rng.random() < 0.6 else rng.choice(held)
            ops.append(["get", k] if rng.random() < 0.5 else ["get", k, rng.choice([-1, "none", 0])])
            held.remove(k)
            held.append(k)
        elif r < 0.7 or not held:  # put: mostly new keys, which evict
            k = rng.choice(absent) if absent and rng.random() < 0.8 else rng.choice(keys)
            ops.append(["put", k, rng.randint(0, 99)])
            if k in held:
                held.remove(k)
            held.append(k)
            if len(held) > cap:
                held.pop(0)
        elif r < 0.78:
            ops.append(["peek", rng.choice(keys)])
        elif r < 0.86:
            ops.append(["in", rng.choice(keys)])
        elif r < 0.92 and absent:  # a miss does not insert
            ops.append(["get", rng.choice(absent), rng.choice([-1, "none"])])
        elif r < 0.96:
            k = rng.choice(keys)
            ops.append(["pop", k])
            if k in held:
                held.remove(k)
        else:
            ops.append(["len"])
    for k in rng.sample(keys, 2):
        ops.append(["in", k])
    return {"fn": "cache", "capacity": cap, "ops": ops}


def _memo_case(rng):
    cap = rng.randint(2, 4)
    hot = rng.sample(range(10), rng.randint(1, cap - 1))
    cold = iter(rng.sample(range(10, 40), 20))
    args = []
    for _ in range(rng.randint(6, 16)):
        args.append(rng.choice(hot) if rng.random() < 0.5 else next(cold))
    return {"fn": "memoize", "capacity": cap, "args": args}


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.65:
            out.append(_cache_case(rng, reads=rng.random() < 0.75))
        else:
            out.append(_memo_case(rng))
    return out


def call(case):
    from lrukit import LRUCache, memoize

    if case["fn"] == "memoize":
        calls = []

        @memoize(capacity=case["capacity"])
        def f(x):
            calls.append(x)
            return x * x + 1

        results = [f(x) for x in case["args"]]
        counts = sorted((x, calls.count(x)) for x in set(calls))
        c = f.cache
        return {"results": results, "calls": counts, "size": len(c), "hits": c.hits, "misses": c.misses}
    c = LRUCache(case["capacity"])
    out = []
    for op in case["ops"]:
        if op[0] == "put":
            out.append(c.put(op[1], op[2]))
        elif op[0] == "get":
            out.append(c.get(op[1]) if len(op) == 2 else c.get(op[1], op[2]))
        elif op[0] == "peek":
            out.append(c.peek(op[1]))
        elif op[0] == "in":
            out.append(op[1] in c)
        elif op[0] == "pop":
            out.append(c.pop(op[1]))
        else:
            out.append(len(c))
    return {"results": out, "keys": list(c.keys()), "hits": c.hits, "misses": c.misses}
