"""Generated check of pyfix-014: Graph built from drawn edge lists that repeat edges in both directions.

A case is a fresh Graph and a sequence of add_edge / remove_edge calls (some repeating an
existing edge reversed, the bug; some repeating it in the same direction; some removing an
edge that is absent, which raises KeyError, recorded and the sequence continued), followed
by the graph's observable state: edge count, edges (as sorted endpoint pairs with weight),
has_edge (asked reversed only in the cases that add edges reversed), degrees, neighbours
and a connected component. A repeated edge is always added again with its first weight,
so whether a duplicate add updates the weight (not specified) never shows. No self-loops.
Other cases put Edge objects in a set and compare hashes of reversed edges.
"""


def _nodes(rng):
    k = rng.randint(3, 6)
    if rng.random() < 0.7:
        return rng.sample(range(1, 20), k)
    return rng.sample(["a", "b", "c", "d", "e", "f", "g", "x", "y"], k)


def _graph_case(rng, reverse):
    nodes = _nodes(rng)
    weight = {}  # frozenset pair -> weight used whenever it is added
    present = {}  # frozenset pair -> (u, v) in the direction first added
    ops = []
    for _ in range(rng.randint(3, 9)):
        r = rng.random()
        if present and r < 0.2:  # add an existing edge again
            u, v = present[rng.choice(sorted(present, key=sorted))]
            if reverse and rng.random() < 0.7:
                u, v = v, u
            ops.append(["add", u, v, weight[frozenset((u, v))]])
        elif present and r < 0.35:  # remove an existing edge
            key = rng.choice(sorted(present, key=sorted))
            u, v = present.pop(key)
            if reverse and rng.random() < 0.6:
                u, v = v, u
            ops.append(["remove", u, v])
        else:
            u, v = rng.sample(nodes, 2)
            key = frozenset((u, v))
            if key in present:
                u, v = present[key]
                if reverse and rng.random() < 0.6:
                    u, v = v, u
                ops.append(["add", u, v, weight[key]])
            elif r < 0.42:  # remove an absent edge: KeyError
                ops.append(["remove", u, v])
            else:
                present[key] = (u, v)
                ops.append(["add", u, v, weight.setdefault(key, rng.randint(1, 9))])
    if (
        reverse
        and present
        and not any(
            op[0] == "add" and frozenset(op[1:3]) in present and present[frozenset(op[1:3])] != tuple(op[1:3])
            for op in ops
        )
    ):
        u, v = present[rng.choice(sorted(present, key=sorted))]
        ops.append(["add", v, u, weight[frozenset((u, v))]])
    pairs = []
    for _ in range(3):
        u, v = rng.sample(nodes, 2)
        if frozenset((u, v)) in present:
            u, v = present[frozenset((u, v))]
            if reverse and rng.random() < 0.6:
                u, v = v, u
        pairs.append([u, v])
    return {"fn": "graph", "ops": ops, "has": pairs, "start": rng.choice(nodes)}


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.85:
            out.append(_graph_case(rng, reverse=rng.random() < 0.6))
        else:
            nodes = _nodes(rng)
            pairs = []
            for _ in range(rng.randint(2, 6)):
                u, v = rng.sample(nodes, 2)
                pairs.append([u, v, rng.randint(1, 5)])
                if rng.random() < 0.5:
                    pairs.append([v, u, rng.randint(1, 5)])
            out.append({"fn": "edgeset", "pairs": pairs})
    return out


def _key(x):
    return (type(x).__name__, x)


def call(case):
    from ugraph import Edge, Graph

    if case["fn"] == "edgeset":
        edges = [Edge(u, v, w) for u, v, w in case["pairs"]]
        distinct = {e for e in edges}
        return [len(distinct), [hash(e) == hash(Edge(e.v, e.u)) for e in edges]]
    g = Graph()
    results = []
    for op in case["ops"]:
        if op[0] == "add":
            results.append(bool(g.add_edge(op[1], op[2], weight=op[3])))
        else:
            try:
                g.remove_edge(op[1], op[2])
                results.append("removed")
            except KeyError:
                results.append("KeyError")
    edges = sorted(tuple(sorted([e.u, e.v], key=_key)) + (e.weight,) for e in g.edges())
    nodes = sorted(g.nodes(), key=_key)
    state = {
        "results": results,
        "edge_count": g.edge_count(),
        "edges": [list(e) for e in edges],
        "has": [bool(g.has_edge(u, v)) for u, v in case["has"]],
        "degree": [g.degree(x) for x in nodes],
        "neighbors": [sorted(g.neighbors(x).items(), key=lambda kv: _key(kv[0])) for x in nodes],
    }
    if case["start"] in nodes:
        state["component"] = sorted(g.connected_component(case["start"]), key=_key)
    return state
