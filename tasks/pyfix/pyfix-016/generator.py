"""Generated check of pyfix-016: TokenBucket and KeyedLimiter under a fake clock with drawn timelines.

A case is a fresh bucket (or keyed limiter) on a fake clock and a timeline of calls at
non-decreasing times: try_acquire(n), reads of `tokens`, time_until(n) (per key for the
limiter). Failed attempts and polls between refills are what the bug double-counts.
Times are multiples of 1/8 s and rates/capacities/n small integers or halves, so the
token arithmetic is exact in binary floating point whatever way a fix computes it;
reported floats are still rounded. A request above the capacity (bucket cases only)
raises ValueError, recorded and the timeline continued.
"""


def _timeline(rng, capacity, rate, keys=None):
    t = 0.0
    ops = []
    wide = rng.random() < 0.2  # widely spaced calls: the bucket is full every time
    if not wide and rng.random() < 0.6:  # start by emptying the bucket
        ops.append([t, "allow", rng.choice(keys), capacity] if keys else [t, "acquire", capacity])
    for _ in range(rng.randint(4, 14)):
        if wide:
            t += capacity / rate + rng.randint(0, 8) / 8
        else:
            t += rng.choice([0, 1, 1, 2, 2, 3, 4, 6, 8]) / 8
        key = rng.choice(keys) if keys else None
        r = rng.random()
        n = rng.choice([1, 1, 1, 2, 0.5, capacity])
        if n > capacity:
            n = 1
        if keys:
            ops.append([t, "allow", key, n])
        elif r < 0.6:
            if rng.random() < 0.03:
                n = capacity + 1
            ops.append([t, "acquire", n])
        elif r < 0.85:
            ops.append([t, "tokens"])
        else:
            ops.append([t, "time_until", n])
    return ops


def cases(rng, n):
    out = []
    for _ in range(n):
        rate = rng.choice([0.5, 1, 1, 2, 3, 4])
        capacity = rng.choice([1, 2, 2, 3, 4, 5])
        if rng.random() < 0.75:
            out.append(
                {"fn": "bucket", "rate": rate, "capacity": capacity, "ops": _timeline(rng, capacity, rate)}
            )
        else:
            keys = ["alice", "bob", "carol"][: rng.randint(1, 3)]
            out.append(
                {
                    "fn": "keyed",
                    "rate": rate,
                    "capacity": capacity,
                    "ops": _timeline(rng, capacity, rate, keys),
                }
            )
    return out


def _r(x):
    return round(float(x), 9)


def call(case):
    from throttle import KeyedLimiter, TokenBucket

    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    if case["fn"] == "keyed":
        lim = KeyedLimiter(rate=case["rate"], capacity=case["capacity"], clock=clock)
    else:
        b = TokenBucket(rate=case["rate"], capacity=case["capacity"], clock=clock)
    out = []
    for op in case["ops"]:
        now[0] = op[0]
        try:
            if op[1] == "allow":
                out.append(bool(lim.allow(op[2], op[3])))
            elif op[1] == "acquire":
                out.append(bool(b.try_acquire(op[2])))
            elif op[1] == "tokens":
                out.append(_r(b.tokens))
            else:
                out.append(_r(b.time_until(op[2])))
        except ValueError:
            out.append("ValueError")
    if case["fn"] == "keyed":
        out.append(len(lim))
    return out
