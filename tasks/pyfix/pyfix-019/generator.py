"""Generated check of pyfix-019: Scheduler driven by drawn sequences of schedule / cancel / run calls.

A case is a fresh Scheduler and a sequence of operations: schedule(at) at integer times
(ties included, which run in scheduling order), call_later(delay), cancel() of a pending
event (often the earliest one, the bug), of one that already ran or was already cancelled,
or of an unknown id (False), next_time(), run_next(), run_until(t) and len(). Every
result is recorded; the case ends with the simulation loop `while s.run_next()` (bounded),
its step count, the callbacks that fired in order, and the clock. An absolute time before
the clock would raise ValueError; the generator follows the documented clock and never
schedules before it.
"""


class _Sim:
    """The documented behaviour, just enough to know the clock (to keep schedules valid)."""

    def __init__(self):
        self.now = 0
        self.live = {}  # handle index -> time, pending events only

    def earliest(self):
        return min(self.live, key=lambda i: (self.live[i], i)) if self.live else None

    def run_next(self):
        i = self.earliest()
        if i is not None:
            self.now = self.live.pop(i)

    def run_until(self, t):
        for i in [i for i, at in self.live.items() if at <= t]:
            del self.live[i]
        self.now = max(self.now, t)


def cases(rng, n):
    out = []
    for _ in range(n):
        cancels = rng.random() < 0.75
        sim = _Sim()
        ops = []
        count = 0

        def sched():
            nonlocal count
            if rng.random() < 0.7:
                at = sim.now + rng.randint(0, 12)
                ops.append(["schedule", at])
            else:
                d = rng.randint(0, 8)
                at = sim.now + d
                ops.append(["call_later", d])
            sim.live[count] = at
            count += 1

        for _ in range(rng.randint(3, 7)):
            sched()
        for _ in range(rng.randint(4, 12)):
            r = rng.random()
            if cancels and r < 0.3:
                if rng.random() < 0.15:
                    ops.append(["cancel_unknown"])
                    continue
                head = sim.earliest()
                i = head if head is not None and rng.random() < 0.6 else rng.randrange(count)
                ops.append(["cancel", i])
                sim.live.pop(i, None)
            elif r < 0.45:
                ops.append(["next_time"])
            elif r < 0.65:
                ops.append(["run_next"])
                sim.run_next()
            elif r < 0.72:
                t = sim.now + rng.randint(0, 6)
                ops.append(["run_until", t])
                sim.run_until(t)
            elif r < 0.78:
                ops.append(["len"])
            elif r < 0.9:
                sched()
            else:
                ops.append(["now"])
        out.append({"ops": ops})
    return out


def call(case):
    from evsched import Scheduler

    s = Scheduler()
    fired = []
    handles = []
    results = []
    for op in case["ops"]:
        kind = op[0]
        if kind == "schedule":
            handles.append(s.schedule(op[1], fired.append, len(handles)))
            results.append(None)
        elif kind == "call_later":
            handles.append(s.call_later(op[1], fired.append, len(handles)))
            results.append(None)
        elif kind == "cancel":
            results.append(bool(s.cancel(handles[op[1]])))
        elif kind == "cancel_unknown":
            results.append(bool(s.cancel(object())))
        elif kind == "next_time":
            results.append(s.next_time())
        elif kind == "run_next":
            results.append(bool(s.run_next()))
        elif kind == "run_until":
            s.run_until(op[1])
            results.append(s.now)
        elif kind == "len":
            results.append(len(s))
        else:
            results.append(s.now)
    steps = 0
    while steps < 60 and s.run_next():
        steps += 1
    return {
        "results": results,
        "steps": steps,
        "fired": fired,
        "now": s.now,
        "after": [s.next_time(), len(s)],
    }
