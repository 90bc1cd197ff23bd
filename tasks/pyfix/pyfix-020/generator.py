"""Generated check of pyfix-020: RingDeque against collections.deque semantics on drawn operation sequences.

A "ops" case is a fresh RingDeque(capacity=c) and a sequence of append / appendleft /
pop / popleft / d[i] / d[i] = v / len / clear, long enough to grow the buffer several
times after its head has wrapped around (the bug). Every result is recorded, then the
contents. Pops and indices follow the documented contents, so they never hit an empty
deque or a missing index, except a few out-of-range reads (IndexError, recorded).
A "bfs" case runs the issue's breadth-first search over a drawn graph with a small
initial capacity and compares the visiting order. The capacity itself (a growth
detail) is never compared.
"""


def _ops_case(rng):
    cap = rng.randint(1, 6)
    init = list(range(100, 100 + rng.randint(0, 3)))
    size = len(init)
    ops = []
    stack = rng.random() < 0.3  # stack use (right end only) never moves the head
    left_bias = 0.0 if stack else rng.choice([0.0, 0.2, 0.35, 0.5])
    pop_bias = rng.choice([0.1, 0.25, 0.35])
    for step in range(rng.randint(10, 60)):
        r = rng.random()
        if size and r < pop_bias:
            ops.append(["popleft" if not stack and rng.random() < 0.6 else "pop"])
            size -= 1
        elif size and r < pop_bias + 0.12:
            if rng.random() < 0.08:
                ops.append(["get", rng.choice([size, -size - 1, size + 2])])  # out of range
            elif rng.random() < 0.7:
                ops.append(["get", rng.randint(-size, size - 1)])
            else:
                ops.append(["set", rng.randint(-size, size - 1), 1000 + step])
        elif r < pop_bias + 0.15:
            ops.append(["len"])
        elif r < pop_bias + 0.155:
            ops.append(["clear"])
            size = 0
        else:
            ops.append(["appendleft" if rng.random() < left_bias else "append", step])
            size += 1
    return {"fn": "ops", "capacity": cap, "init": init, "ops": ops}


def _bfs_case(rng):
    n = rng.randint(8, 60)
    adj = {}
    for i in range(n):
        k = rng.choice([1, 2, 2, 3, 4])
        adj[i] = rng.sample(range(n), min(n, k))
    for i in range(1, n):  # keep most nodes reachable
        if rng.random() < 0.8:
            adj[rng.randrange(i)].append(i)
    return {
        "fn": "bfs",
        "adj": [adj[i] for i in range(n)],
        "capacity": rng.choice([1, 2, 3, 4, 64]),
        "start": rng.randrange(n),
    }


def cases(rng, n):
    return [_bfs_case(rng) if rng.random() < 0.25 else _ops_case(rng) for _ in range(n)]


def call(case):
    from ringq import RingDeque

    if case["fn"] == "bfs":
        adj = case["adj"]
        start = case["start"]
        seen, order, queue = {start}, [], RingDeque([start], capacity=case["capacity"])
        while len(queue):
            node = queue.popleft()
            order.append(node)
            if len(order) > len(adj):
                break
            for nxt in adj[node]:
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return order
    d = RingDeque(case["init"], capacity=case["capacity"])
    out = []
    for op in case["ops"]:
        kind = op[0]
        if kind == "append":
            d.append(op[1])
        elif kind == "appendleft":
            d.appendleft(op[1])
        elif kind == "pop":
            out.append(d.pop())
        elif kind == "popleft":
            out.append(d.popleft())
        elif kind == "get":
            try:
                out.append(d[op[1]])
            except IndexError:
                out.append("IndexError")
        elif kind == "set":
            d[op[1]] = op[2]
        elif kind == "len":
            out.append(len(d))
        else:
            d.clear()
    return {"results": out, "items": list(d), "len": len(d)}
