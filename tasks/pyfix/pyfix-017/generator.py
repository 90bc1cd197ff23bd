"""Generated check of pyfix-017: resolve() / install_order() / dependents() on drawn package graphs.

Each case draws a fresh acyclic graph (dependency lists in drawn order) and makes several
calls whose answers must not depend on any earlier call, in this case or another:
* "resolve": plain resolve() of a few targets in a row (the bug: the default list is shared);
* "accumulate": resolve() with an explicit list over several targets, and install_order();
* "dependents": dependents() of some packages (untouched by the bug);
* "cycle": resolve() of a graph with a real cycle (CycleError, reported as the sorted set of
  packages on the reported path), then of an acyclic graph over the same names (the bug's
  second symptom: a bogus CycleError).
Cycle cases use their own package names, so the cycle a buggy package leaves behind shows
in cycle cases only; the other names avoid those of the fixed tests.
"""

NAMES = [
    "core",
    "utils",
    "log",
    "net",
    "json",
    "yaml",
    "cache",
    "auth",
    "orm",
    "cli2",
    "ui",
    "api",
    "sched",
    "mail",
    "pdf",
    "img",
    "math2",
    "test2",
]
CYCLE_NAMES = ["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]


def _dag(rng, names):
    """A random acyclic graph: each package depends only on later ones in a shuffled order."""
    order = list(names)
    rng.shuffle(order)
    graph = {}
    for i, pkg in enumerate(order):
        later = order[i + 1 :]
        deps = rng.sample(later, min(len(later), rng.choice([0, 1, 1, 2, 2, 3])))
        if deps or rng.random() < 0.6:  # some leaves appear only as dependencies
            graph[pkg] = deps
    return graph


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.75:
            names = rng.sample(NAMES, rng.randint(4, 9))
            graph = _dag(rng, names)
            targets = [rng.choice(names) for _ in range(rng.randint(2, 4))]
            if r < 0.35:
                kind = "resolve"
            elif r < 0.63:
                kind = "accumulate"
            else:
                kind = "dependents"
            out.append({"fn": kind, "graph": graph, "targets": targets})
        else:
            names = rng.sample(CYCLE_NAMES, rng.randint(3, 7))
            k = rng.randint(2, len(names))
            loop, rest = names[:k], names[k:]
            graph = _dag(rng, rest)  # the ring is the only cycle: nothing leads back
            for a, b in zip(loop, loop[1:] + loop[:1]):
                graph[a] = [b] + rng.sample(rest, min(len(rest), rng.randint(0, 1)))
                rng.shuffle(graph[a])
            # an acyclic graph over the same names (drawn afresh)
            out.append(
                {
                    "fn": "cycle",
                    "graph": graph,
                    "target": rng.choice(loop),
                    "after": _dag(rng, names),
                    "targets": [rng.choice(names) for _ in range(2)],
                }
            )
    return out


def call(case):
    from depgraph import CycleError, dependents, install_order, resolve

    graph = {k: list(v) for k, v in case["graph"].items()}
    if case["fn"] == "resolve":
        return [list(resolve(graph, t)) for t in case["targets"]]
    if case["fn"] == "accumulate":
        acc = []
        steps = []
        for t in case["targets"]:
            got = resolve(graph, t, acc)
            steps.append([got is acc, list(acc)])
        return [steps, list(install_order(graph, case["targets"]))]
    if case["fn"] == "dependents":
        return [sorted(dependents(graph, t)) for t in case["targets"]]
    out = []
    try:
        out.append(list(resolve(graph, case["target"])))
    except CycleError as exc:
        out.append(["CycleError", exc.path[0] == exc.path[-1], sorted(set(exc.path))])
    after = {k: list(v) for k, v in case["after"].items()}
    for t in case["targets"]:
        try:
            out.append(list(resolve(after, t)))
        except CycleError as exc:
            out.append(["CycleError", sorted(set(exc.path))])
    out.append(list(install_order(after, case["targets"])))
    return out
