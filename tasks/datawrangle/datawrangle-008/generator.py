"""Generated check of datawrangle-008: the procedure run on freshly drawn clickstreams.

Each input set is a new ``data/clicks.csv`` in no particular order: users in mixed case and
padded, timestamps in the three accepted forms (``Z``, UTC offsets including half hours and
negative ones, the space form without a zone), gaps of exactly 1800 s (same session) and
1801 s (new session), events at the same instant on other pages, sessions across midnight
(in UTC and in local time), exact and re-expressed copies of events (the same instant in
another form, a padded page), invalid rows (an empty user; timestamps of other forms, with
a zone where none may be, or naming a date or time that does not exist), blank and
whitespace-only lines. The CSV has a fixed layout and must equal the reference's byte for
byte; the JSON file must hold the same object (its layout is not fixed).
"""

import datetime

INPUTS = ["data/clicks.csv"]
OUTPUTS = ["out/sessions.csv", "out/user_stats.json"]

USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "gina", "henry", "ivan", "judy", "ken_1", "lee"]
PAGES = ["/", "/account", "/cart", "/checkout", "/help", "/product/17", "/product/42", "/search", "/a"]
OFFSETS = [0, 60, 120, -240, -300, 330, 540, -180, 345, 600, -600, 780]
UTC = datetime.timezone.utc


def _user(rng, u):
    shown = rng.choice([u, u, u, u.upper(), u.title()])
    return rng.choice(["", "", "", " ", "  "]) + shown + rng.choice(["", "", "", " "])


def _ts(rng, t):
    """The instant t (aware, UTC) in one of the three accepted forms."""
    k = rng.random()
    if k < 0.35:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    if k < 0.6:
        return t.strftime("%Y-%m-%d %H:%M:%S")
    off = rng.choice(OFFSETS)
    local = t.astimezone(datetime.timezone(datetime.timedelta(minutes=off)))
    sign = "-" if off < 0 else "+"
    return local.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{abs(off) // 60:02d}:{abs(off) % 60:02d}"


def _bad_ts(rng, t):
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    return rng.choice(
        [
            s,  # a T without a zone
            s.replace("T", " ") + "Z",  # the space form with a zone
            s.replace("T", " ") + "+02:00",
            s + "+0200",
            s[:-3] + "Z",
            s + ".250Z",
            t.strftime("%Y/%m/%d %H:%M:%S"),
            t.strftime("%d.%m.%Y %H:%M"),
            s[:11] + "25" + s[13:] + "Z",  # hour 25
            s[:14] + "61" + s[16:] + "Z",  # minute 61
            t.strftime("%Y-02-30T%H:%M:%SZ"),
            t.strftime("%Y-13-%dT%H:%M:%SZ"),
            t.strftime("%Y-04-31 %H:%M:%S"),
            "",
            "yesterday",
            str(int(t.timestamp())),
        ]
    )


def inputs(rng):
    start = datetime.datetime(2024, rng.randint(1, 12), rng.randint(1, 27), rng.randint(0, 12), tzinfo=UTC)
    users = rng.sample(USERS, rng.randint(3, 8))
    events = []  # (user, instant, page)
    for u in users:
        t = start + datetime.timedelta(seconds=rng.randrange(6 * 3600))
        for _ in range(rng.randint(1, 5)):  # sessions
            for _ in range(rng.randint(1, 7)):  # events
                events.append((u, t, rng.choice(PAGES)))
                r = rng.random()
                if r < 0.08:  # another page at the same instant
                    continue
                t += datetime.timedelta(seconds=1800 if r < 0.2 else rng.randint(1, 1799))
            t += datetime.timedelta(
                seconds=rng.choice(
                    [1801, 1801, rng.randint(1802, 4 * 3600), rng.randint(3 * 3600, 10 * 3600)]
                )
            )
    # the last step of each run above may land on the same instant and page twice: keep events unique
    seen, unique = set(), []
    for e in events:
        if e not in seen:
            seen.add(e)
            unique.append(e)
    rows = [",".join([_user(rng, u), _ts(rng, t), page]) for u, t, page in unique]
    for u, t, page in rng.sample(unique, min(len(unique), rng.randint(1, 8))):  # copies of events
        shown = rng.choice([page, page, " " + page, page + " "])
        rows.append(",".join([_user(rng, u), _ts(rng, t), shown]))
    for _ in range(rng.randint(1, 7)):  # invalid rows
        u, t, page = rng.choice(unique)
        if rng.random() < 0.3:
            rows.append(",".join([rng.choice(["", " ", "  "]), _ts(rng, t), page]))
        else:
            rows.append(",".join([_user(rng, u), _bad_ts(rng, t), page]))
    rng.shuffle(rows)
    lines = ["user,timestamp,page"]
    for r in rows:
        lines.append(r)
        if rng.random() < 0.04:
            lines.append(rng.choice(["", "", "   ", "\t"]))
    return {"data/clicks.csv": "\n".join(lines) + "\n"}
