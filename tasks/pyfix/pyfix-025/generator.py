"""Generated check of pyfix-025: compare / satisfies / max_version / sort_versions with
multi-digit version components.

Versions are dotted numbers (optionally "v"-prefixed, optionally with trailing ".0"
components, which the docstring says are not significant) whose components are one or
several digits; pairs and lists share prefixes so that the deciding component is often a
one-digit against a several-digit number, where the bug shows. Components never have
leading zeros, and lists given to sort_versions / max_version never hold two versions of
equal value (their relative order would be an accident of the stable sort).
parse_version itself is not asked: the issue only concerns comparisons.
"""

OPS = [">=", "<=", "==", "!=", ">", "<"]


def _component(rng):
    r = rng.random()
    if r < 0.45:
        return rng.randint(0, 9)
    if r < 0.85:
        return rng.randint(10, 99)
    return rng.randint(100, 2024)


def _text(parts, rng):
    parts = list(parts)
    if rng.random() < 0.25:
        parts += [0] * rng.randint(1, 2)
    text = ".".join(str(p) for p in parts)
    if rng.random() < 0.15:
        text = "v" + text
    return text


def _key(parts):
    parts = list(parts)
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _variant(rng, base):
    """A version sharing a prefix of ``base`` and differing after it."""
    cut = rng.randint(0, len(base) - 1)
    parts = list(base[:cut]) + [_component(rng)]
    parts += [_component(rng) for _ in range(rng.randint(0, 2))]
    return parts


def _base(rng):
    return [_component(rng) for _ in range(rng.randint(1, 4))]


def _distinct_list(rng, size):
    base = _base(rng)
    seen, out = set(), []
    for _ in range(size * 4):
        parts = _variant(rng, base) if rng.random() < 0.8 else _base(rng)
        if _key(parts) in seen:
            continue
        seen.add(_key(parts))
        out.append(_text(parts, rng))
        if len(out) == size:
            break
    return out


def _spec(rng, version_parts):
    clauses = []
    for _ in range(rng.randint(1, 2)):
        other = _variant(rng, version_parts) if rng.random() < 0.85 else list(version_parts)
        clauses.append(rng.choice(OPS) + rng.choice(["", " "]) + _text(other, rng))
    return ", ".join(clauses)


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.4:
            a = _base(rng)
            b = _variant(rng, a) if rng.random() < 0.85 else list(a)
            out.append({"fn": "compare", "a": _text(a, rng), "b": _text(b, rng)})
        elif r < 0.65:
            v = _base(rng)
            out.append({"fn": "satisfies", "version": _text(v, rng), "spec": _spec(rng, v)})
        elif r < 0.8:
            out.append({"fn": "max_version", "versions": _distinct_list(rng, rng.randint(2, 5))})
        elif r < 0.95:
            out.append(
                {
                    "fn": "sort_versions",
                    "versions": _distinct_list(rng, rng.randint(2, 6)),
                    "reverse": rng.random() < 0.3,
                }
            )
        else:
            good = _text(_base(rng), rng)
            bad = rng.choice(["1.x", "1..2", "", "1.2-beta", "v", "1.2."])
            a, b = (good, bad) if rng.random() < 0.5 else (bad, good)
            out.append({"fn": "compare", "a": a, "b": b})
    return out


def call(case):
    import verscmp

    fn = case["fn"]
    if fn == "compare":
        return verscmp.compare(case["a"], case["b"])
    if fn == "satisfies":
        return verscmp.satisfies(case["version"], case["spec"])
    if fn == "max_version":
        return verscmp.max_version(list(case["versions"]))
    return list(verscmp.sort_versions(list(case["versions"]), reverse=case["reverse"]))
