"""Generated check of datawrangle-006: the procedure run on freshly drawn JSON-lines event streams.

Each input set is a new ``data/events.jsonl``: events with shuffled keys, timestamps as epoch
integers, ``Z`` and ``+HH:MM``/``-HH:MM`` offsets (some crossing midnight, some equal instants
written differently, so ties are broken by id), padded and mixed-case types and currencies,
users and props missing, null or partial, amounts as JSON numbers or numeric strings; and
lines to reject of every kind the instruction names (not JSON, not an object, an id missing,
empty or not a string, a type missing, blank or not a string, a timestamp missing or
unparseable: other layouts, no zone, fractions of a second, an epoch written as a string), always
at least one, plus duplicates of accepted ids (and a rejected line whose id is accepted later,
which is no duplicate), blank and whitespace-only lines. The CSV and the list of line numbers
must equal the reference's byte for byte (their layout is fixed); the JSON summary must hold
the same object (its layout is not fixed).
"""

import datetime
import json

INPUTS = ["data/events.jsonl"]
OUTPUTS = ["out/events.csv", "out/rejected_lines.txt", "out/summary.json"]

TYPES = ["page_view", "page_view", "page_view", "add_to_cart", "purchase", "refund", "signup", "logout"]
USERS = [101, 102, 230, 405, 7, "u-77", "u_12", "A9"]
NAMES = ["ana", "bo", "chen", "dee"]
CURRENCIES = ["EUR", "USD", "GBP", "JPY"]
OFFSETS = [0, 0, 0, 330, -180, 540, -300, 60, 345, -600, 120, 600, -420]
UTC = datetime.timezone.utc


def _type(rng, t):
    shown = rng.choice([t, t, t.upper(), t.title(), t.capitalize()])
    return rng.choice(["", "", "", " "]) + shown + rng.choice(["", "", "", " ", "  "])


def _ts(rng, instant):
    """The instant (an aware UTC datetime) written in one of the accepted forms."""
    k = rng.random()
    if k < 0.25:
        return int(instant.timestamp())
    if k < 0.5:
        return instant.strftime("%Y-%m-%dT%H:%M:%SZ")
    off = rng.choice(OFFSETS)
    local = instant.astimezone(datetime.timezone(datetime.timedelta(minutes=off)))
    sign = "-" if off < 0 else "+"
    return local.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{abs(off) // 60:02d}:{abs(off) % 60:02d}"


def _amount(rng):
    cents = rng.randint(100, 30000)
    k = rng.random()
    if k < 0.3:
        return f"{cents // 100}.{cents % 100:02d}"
    if k < 0.4:
        return str(cents // 100)
    if k < 0.55:
        return cents // 100
    return float(f"{cents // 100}.{cents % 100:02d}")


def _event(rng, eid, instant):
    ev = {"id": eid, "type": _type(rng, rng.choice(TYPES)), "ts": _ts(rng, instant)}
    k = rng.random()
    if k < 0.7:
        user = {"id": rng.choice(USERS)}
        if rng.random() < 0.5:
            user["name"] = rng.choice(NAMES)
        ev["user"] = user
    elif k < 0.8:
        ev["user"] = rng.choice([None, {"id": None}, {"name": rng.choice(NAMES)}])
    k = rng.random()
    if k < 0.45:
        props = {}
        if rng.random() < 0.85:
            props["amount"] = _amount(rng) if rng.random() < 0.85 else None
        if rng.random() < 0.75:
            c = rng.choice(CURRENCIES)
            props["currency"] = rng.choice([c, c.lower(), c.lower() + " ", " " + c])
        ev["props"] = props
    elif k < 0.6:
        ev["props"] = {"path": rng.choice(["/", "/cart", "/p/42"])}
    elif k < 0.65:
        ev["props"] = None
    return ev


def _dump(rng, obj):
    if isinstance(obj, dict):
        keys = list(obj)
        rng.shuffle(keys)
        obj = {k: obj[k] for k in keys}
    sep = rng.choice([(", ", ": "), (",", ":")])
    return json.dumps(obj, separators=sep)


def _rejected(rng, eid, instant):
    ev = _event(rng, eid, instant)
    k = rng.randrange(12)
    if k == 0:
        text = _dump(rng, ev)
        return text[: rng.randint(5, len(text) - 1)]
    if k == 1:
        return rng.choice(["not json at all", "{id: 'evt'}", '{"id": "x",}'])
    if k == 2:
        return _dump(rng, rng.choice([[ev["id"], ev["ts"], "signup"], "evt_1", 42, None]))
    if k == 3:
        del ev["id"]
    elif k == 4:
        ev["id"] = rng.choice(["", 17, None, ["evt_1"]])
    elif k == 5:
        del ev["type"]
    elif k == 6:
        ev["type"] = rng.choice(["", "   ", 5, None])
    elif k == 7:
        del ev["ts"]
    elif k == 8:
        ev["ts"] = None
    elif k == 9:
        t = instant.strftime("%Y-%m-%dT%H:%M:%S")
        ev["ts"] = rng.choice(
            [
                t,
                t.replace("T", " ") + "Z",
                t + "+0530",
                t + ".123Z",
                t[:-3] + "Z",
                t + " UTC",
                t + "+05",
                instant.strftime("%d/%m/%Y %H:%M:%S"),
                "yesterday",
                "",
            ]
        )
    elif k == 10:
        ev["ts"] = rng.choice(
            [
                {"epoch": int(instant.timestamp())},
                [int(instant.timestamp())],
                instant.strftime("%Y-%m-%d"),
                instant.strftime("%Y%m%dT%H%M%SZ"),
            ]
        )
    else:
        ev["ts"] = str(int(instant.timestamp()))
    return _dump(rng, ev)


def inputs(rng):
    day = datetime.datetime(2024, rng.randint(1, 12), rng.randint(1, 28), rng.randint(18, 22), tzinfo=UTC)
    n = rng.randint(50, 120)
    nums = rng.sample(range(1, 10000), n + 10)
    ids = [f"evt_{x:04d}" for x in nums]
    instants = [day + datetime.timedelta(seconds=rng.randrange(5 * 3600)) for _ in range(n)]
    for i in rng.sample(range(1, n), min(n - 1, rng.randint(1, 4))):  # equal instants, other ids
        instants[i] = instants[i - 1]
    lines = []
    accepted = []
    rejected_at = set(rng.sample(range(n), rng.randint(1, 8)))
    late_ids = ids[n:]
    for i in range(n):
        if i in rejected_at:
            eid = rng.choice(late_ids) if rng.random() < 0.3 else ids[i]
            lines.append(_rejected(rng, eid, instants[i]))
            if eid != ids[i]:  # the same id, accepted later: no duplicate
                lines.append(_dump(rng, _event(rng, eid, instants[i] + datetime.timedelta(seconds=7))))
                late_ids.remove(eid)
                accepted.append(eid)
        else:
            lines.append(_dump(rng, _event(rng, ids[i], instants[i])))
            accepted.append(ids[i])
        r = rng.random()
        if r < 0.08 and accepted:  # a duplicate of an accepted id, other fields differ
            dup = _event(rng, rng.choice(accepted), day + datetime.timedelta(seconds=rng.randrange(5 * 3600)))
            lines.append(_dump(rng, dup))
        elif r < 0.12:
            lines.append(rng.choice(["", "", "   ", "\t"]))
    return {"data/events.jsonl": "\n".join(lines) + "\n"}
