"""Generated check of pyfix-009: compare() / sort_versions() / latest() follow SemVer 2.0.0 section 11.

Versions share a few major.minor.patch cores so that pre-release identifiers decide the
order: numeric identifiers of different digit counts, alphanumeric ones (letters,
hyphens, upper case), numeric against alphanumeric, one identifier list a prefix of
another, a release against its pre-releases, build metadata (ignored), an optional "v"
and Version objects among strings. Every answer is fixed by the spec and the
docstrings; where the spec leaves a choice, the draw avoids it: `latest()` never gets
two different items of the highest precedence, and `sort_versions(..., reverse=True)`
never gets two items of equal precedence (only the forward sort is documented stable).
"""

WORDS = [
    "alpha",
    "beta",
    "rc",
    "x",
    "y",
    "z",
    "final",
    "dev",
    "SNAPSHOT",
    "Beta",
    "RC",
    "b",
    "0a",
    "build",
    "pre1",
    "M1",
]
HYPHENED = ["a-1", "pre-2", "alpha-2", "-x", "rc-final", "x-y"]
BUILDS = ["b1", "b2", "exp.sha.5114f85", "20240101", "ci.7", "001"]


def _small(rng):
    return str(rng.randint(0, 9))


def _big(rng):
    return str(rng.randint(10, 99) if rng.random() < 0.7 else rng.randint(100, 1200))


def _flip(rng):
    """Two identifiers whose SemVer order differs from their plain string order."""
    r = rng.random()
    if r < 0.7:  # numbers of different digit counts, e.g. 9 and 10
        while True:
            a = rng.randint(1, 9) if rng.random() < 0.7 else rng.randint(10, 99)
            b = rng.randint(10, 99) if a < 10 else rng.randint(100, 999)
            if (str(a) < str(b)) != (a < b):
                return [str(a)], [str(b)]
    if r < 0.85:  # a hyphen-led alphanumeric identifier against a number (numbers are lower)
        return [rng.choice(["-x", "-1", "--"])], [_small(rng)]
    word = rng.choice(["alpha", "rc", "x", "beta"])  # "alpha-2" against "alpha.1"
    return [word + "-" + rng.choice(["2", "b", "final"])], [word, rng.choice(["1", "9", "a", "z"])]


def _plain_ids(rng):
    """Pre-release identifiers whose string order agrees with SemVer (single digits, no hyphens)."""
    ids = [rng.choice(WORDS) if rng.random() < 0.7 else _small(rng)]
    for _ in range(rng.choice([0, 1, 1, 2])):
        ids.append(_small(rng) if rng.random() < 0.55 else rng.choice(WORDS))
    return ids


def _version(rng, core, ids, build_p=0.15):
    text = "v" if rng.random() < 0.1 else ""
    text += "%d.%d.%d" % core
    if ids:
        text += "-" + ".".join(ids)
    if rng.random() < build_p:
        text += "+" + rng.choice(BUILDS)
    return text


def _core(rng):
    return (rng.randint(0, 3), rng.randint(0, 12), rng.randint(0, 3))


def _family(rng, k, trap):
    """k versions, mostly sharing one core; with trap, two of them (same core) form a flipped pair."""
    cores = [_core(rng) for _ in range(2)]
    prefix = _plain_ids(rng)[: rng.randint(0, 2)]
    out = []
    if trap:
        a, b = _flip(rng)
        tail = [_small(rng)] if rng.random() < 0.3 else []
        out += [_version(rng, cores[0], prefix + a + tail), _version(rng, cores[0], prefix + b)]
    while len(out) < k:
        core = cores[0] if rng.random() < 0.75 else cores[1]
        r = rng.random()
        if r < 0.15:
            ids = []
        elif r < 0.7:
            ids = prefix + [_small(rng) if rng.random() < 0.5 else rng.choice(WORDS)]
        else:
            ids = _plain_ids(rng)
        if trap and rng.random() < 0.3:
            ids = prefix + [_big(rng)]
        out.append(_version(rng, core, ids))
    rng.shuffle(out)
    return out[:k]


def _key(text):
    """Precedence per SemVer 2.0.0 section 11 (used only to steer the draw away from ties)."""
    text = text.lstrip("v").split("+")[0]
    core, _, pre = text.partition("-")
    ids = pre.split(".") if pre else []
    return (
        tuple(int(x) for x in core.split(".")),
        not ids,
        tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in ids),
    )


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        trap = rng.random() < 0.6
        if r < 0.4:
            a, b = _family(rng, 2, trap)
            if rng.random() < 0.1:
                b = a.split("+")[0] + "+" + rng.choice(BUILDS)
            out.append({"fn": "compare", "a": a, "b": b})
        elif r < 0.75:
            items = _family(rng, rng.randint(3, 7), trap)
            reverse = rng.random() < 0.25
            if reverse:
                uniq = {}
                for v in items:
                    uniq.setdefault(_key(v), v)
                items = list(uniq.values())
            objects = sorted(rng.sample(range(len(items)), rng.randint(0, 1)))
            out.append({"fn": "sort_versions", "items": items, "reverse": reverse, "objects": objects})
        else:
            items = _family(rng, rng.randint(2, 6), trap)
            include = rng.random() < 0.8
            pool = [v for v in items if include or "-" not in v.lstrip("v").split("+")[0]]
            if not pool:  # keep the answer from being None: add a release
                release = items[0].split("+")[0].split("-")[0]
                items.insert(rng.randrange(len(items) + 1), release)
                pool = [release]
            if pool:
                top = max(_key(v) for v in pool)
                tops = [v for v in pool if _key(v) == top]
                items = [v for v in items if v not in tops or v == tops[0]]
            out.append({"fn": "latest", "items": items, "include_prerelease": include})
    return out


def call(case):
    from semverlib import compare, latest, parse, sort_versions

    if case["fn"] == "compare":
        return compare(case["a"], case["b"])
    if case["fn"] == "latest":
        return latest(list(case["items"]), include_prerelease=case["include_prerelease"])
    items = [parse(v) if i in case["objects"] else v for i, v in enumerate(case["items"])]
    return [str(v) for v in sort_versions(items, reverse=case["reverse"])]
