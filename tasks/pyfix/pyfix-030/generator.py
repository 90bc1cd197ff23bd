"""Generated check of pyfix-030: a capped backoff stays at the cap for any number of attempts.

Policies have a positive base and cap and a float or integer factor >= 1. Cases ask
raw_delay() for small attempts (the usual growth) and for huge ones (far past the point
where factor ** attempt overflows a float), delay() with jitter (only its bounds are
compared: [0, d] for "full" -- and not always 0 --, [d/2, d] for "equal"), long runs of
the delays() generator, and retry_call() with a function that fails many times before it
succeeds or the attempts run out (sleep recorded, never slept). base is never 0: the
product 0 * factor ** attempt is then left to floating point.
"""

BASES = [0.1, 0.25, 0.5, 0.5, 1.0, 2.0]
CAPS = [1.0, 3.0, 10.0, 12.0, 30.0, 30.0, 60.0, 300.0]
FLOAT_FACTORS = [2.0, 2.0, 1.5, 3.0, 1.1, 10.0]


def _policy(rng, int_factor_ok=True):
    r = rng.random()
    if r < 0.75:
        factor = rng.choice(FLOAT_FACTORS)
    elif r < 0.9 and int_factor_ok:
        factor = rng.choice([2, 3, 4])
    else:
        factor = rng.choice([1.0, 1, 1.0005])
    return {"base": rng.choice(BASES), "factor": factor, "cap": rng.choice(CAPS)}


def _attempt(rng, policy, huge):
    if not huge:
        return rng.randint(0, 14)
    if isinstance(policy["factor"], int):
        return rng.randint(1100, 5000)  # integer powers stay cheap
    return rng.choice([rng.randint(1023, 3000), rng.randint(3000, 100000), 10**6])


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        huge = rng.random() < 0.6
        if r < 0.35:
            p = _policy(rng)
            out.append({"fn": "raw_delay", "policy": p, "attempt": _attempt(rng, p, huge)})
        elif r < 0.52:
            p = _policy(rng)
            p["jitter"] = rng.choice(["full", "equal"])
            out.append(
                {"fn": "delay", "policy": p, "attempt": _attempt(rng, p, huge), "seed": rng.randint(0, 10**6)}
            )
        elif r < 0.65:
            p = _policy(rng, int_factor_ok=False)
            count = rng.randint(1030, 1600) if huge else rng.randint(1, 40)
            out.append({"fn": "delays", "policy": p, "count": count, "bounded": rng.random() < 0.5})
        elif r < 0.97:
            p = _policy(rng, int_factor_ok=False)
            failures = rng.randint(1030, 1600) if huge else rng.randint(0, 30)
            r2 = rng.random()
            if r2 < 0.5:
                max_attempts = None
            elif r2 < 0.8:
                max_attempts = failures + rng.randint(1, 5)
            else:
                max_attempts = max(1, failures - rng.randint(0, 20))
            out.append(
                {
                    "fn": "retry_call",
                    "policy": p,
                    "failures": failures,
                    "max_attempts": max_attempts,
                    "error": rng.choice(["ConnectionError", "TimeoutError", "OSError"]),
                }
            )
        else:
            out.append({"fn": "raw_delay", "policy": _policy(rng), "attempt": -rng.randint(1, 5)})
    return out


def _r(x):
    return round(x, 9) if isinstance(x, float) else x


def call(case):
    import itertools
    import random

    from backoffkit import Backoff, RetryError, retry_call

    policy = Backoff(**case["policy"])
    fn = case["fn"]
    if fn == "raw_delay":
        return _r(policy.raw_delay(case["attempt"]))
    if fn == "delay":
        rng = random.Random(case["seed"])
        d = policy.raw_delay(case["attempt"])
        values = [policy.delay(case["attempt"], rng) for _ in range(5)]
        lo = d / 2 if case["policy"]["jitter"] == "equal" else 0.0
        eps = 1e-9
        return [_r(d), all(lo - eps <= v <= d + eps for v in values), any(v > 0 for v in values)]
    if fn == "delays":
        if case["bounded"]:
            got = list(policy.delays(max_attempts=case["count"]))
        else:
            got = list(itertools.islice(policy.delays(), case["count"]))
        return [len(got), [_r(x) for x in got[:3]], [_r(x) for x in got[-3:]], _r(max(got))]

    error = {"ConnectionError": ConnectionError, "TimeoutError": TimeoutError, "OSError": OSError}[
        case["error"]
    ]
    calls = [0]
    sleeps = []

    def flaky():
        calls[0] += 1
        if calls[0] <= case["failures"]:
            raise error("down")
        return "connected"

    try:
        result = retry_call(flaky, policy, max_attempts=case["max_attempts"], sleep=sleeps.append)
    except RetryError as exc:
        cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else None
        return [
            "RetryError",
            exc.attempts,
            cause,
            calls[0],
            len(sleeps),
            [_r(x) for x in sleeps[-2:]],
            _r(max(sleeps)) if sleeps else None,
        ]
    return [
        "returned",
        result,
        calls[0],
        len(sleeps),
        [_r(x) for x in sleeps[-2:]],
        _r(max(sleeps)) if sleeps else None,
    ]


def same(expected, actual):
    """Equal, with floats compared to a relative 1e-9 (the delay formula may be evaluated differently)."""
    import math

    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(expected) == len(actual)
            and all(same(e, a) for e, a in zip(expected, actual))
        )
    return type(expected) is type(actual) and expected == actual
