"""Generated check of pyfix-032: day-of-month and day-of-week follow crontab(5).

Expressions combine drawn minute / hour / month fields with day fields that are either
restricted (values, ranges, lists, "a-b/n", "a/n", names) or start with "*" ("*", "*/n",
which the issue says must keep behaving as before). Restricted day fields never select
their whole range (e.g. "1-31" or "0-6"), where implementations of "restricted" differ.
Cases ask matches() on moments chosen to hit the day-of-month or the day-of-week (or
neither) and next_after() from drawn moments, some of them aware (tzinfo must be kept).
Results travel as booleans and ISO strings.
"""

MINUTES = ["0", "30", "*/15", "0,30", "5-10", "45", "*/20"]
HOURS = ["8", "*/6", "9-17", "0", "12", "22", "6,18"]
DOM_RESTRICTED = ["1", "15", "1,15", "10-20", "1-10/3", "13", "31", "29", "5/7", "28-30", "2,9,16"]
DOM_STAR = ["*", "*", "*/2", "*/5", "*/10"]
MONTHS = ["*", "*", "*", "1", "jan", "2", "1-6", "*/3", "jun-aug", "feb,mar", "12"]
DOW_RESTRICTED = ["mon", "1", "fri", "0", "7", "sun", "mon-fri", "sat,sun", "1-5/2", "tue,thu", "wed", "6"]
DOW_STAR = ["*", "*", "*/2", "*/3"]
MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


def _values(spec, lo, hi, names=None):
    """The set selected by one field (same grammar as the README)."""

    def value(tok):
        tok = tok.lower()
        return names.index(tok) + lo if names and tok in names else int(tok)

    out = set()
    for part in spec.split(","):
        rng, slash, step = part.partition("/")
        step = int(step) if slash else 1
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (value(t) for t in rng.split("-", 1))
        else:
            a = value(rng)
            b = hi if slash else a
        out.update(range(a, b + 1, step))
    return out


def _expr(rng):
    both = rng.random() < 0.6
    dom = rng.choice(DOM_RESTRICTED) if both or rng.random() < 0.5 else rng.choice(DOM_STAR)
    dow = rng.choice(DOW_RESTRICTED) if both or rng.random() < 0.5 else rng.choice(DOW_STAR)
    return [rng.choice(MINUTES), rng.choice(HOURS), dom, rng.choice(MONTHS), dow]


def _moment(rng, fields):
    import datetime

    minutes = sorted(_values(fields[0], 0, 59))
    hours = sorted(_values(fields[1], 0, 23))
    days = _values(fields[2], 1, 31)
    months = sorted(_values(fields[3], 1, 12, MONTH_NAMES))
    weekdays = {d % 7 for d in _values(fields[4], 0, 7, DAY_NAMES)}
    year = rng.choice([2024, 2025, 2026])
    month = rng.choice(months) if rng.random() < 0.85 else rng.randint(1, 12)
    first = datetime.date(year, month, 1)
    month_days = [
        first + datetime.timedelta(days=i)
        for i in range(31)
        if (first + datetime.timedelta(days=i)).month == month
    ]
    want = rng.random()
    if want < 0.4:
        pool = [d for d in month_days if d.day in days]
    elif want < 0.8:
        pool = [d for d in month_days if (d.weekday() + 1) % 7 in weekdays]
    else:
        pool = []
    day = rng.choice(pool or month_days)
    if rng.random() < 0.85:
        hour, minute = rng.choice(hours), rng.choice(minutes)
    else:
        hour, minute = rng.randint(0, 23), rng.randint(0, 59)
    return [day.year, day.month, day.day, hour, minute]


def cases(rng, n):
    out = []
    for _ in range(n):
        fields = _expr(rng)
        text = " ".join(fields)
        if rng.random() < 0.55:
            out.append({"fn": "matches", "expr": text, "at": _moment(rng, fields)})
        else:
            y, mo, d, h, mi = _moment(rng, fields)
            at = [y, mo, d, rng.randint(0, 23), rng.randint(0, 59)]
            if rng.random() < 0.3:
                at = [y, mo, d, h, mi]  # right on a (possible) match: strictly after
            tz = rng.choice([None, None, None, 120, -300, 330])
            out.append(
                {"fn": "next_after", "expr": text, "at": at, "tz": tz, "second": rng.choice([0, 0, 30])}
            )
    return out


def call(case):
    from datetime import datetime, timedelta, timezone

    from cronlite import CronExpr

    expr = CronExpr(case["expr"])
    y, mo, d, h, mi = case["at"]
    if case["fn"] == "matches":
        return expr.matches(datetime(y, mo, d, h, mi))
    tz = None if case["tz"] is None else timezone(timedelta(minutes=case["tz"]))
    got = expr.next_after(datetime(y, mo, d, h, mi, case["second"], tzinfo=tz))
    return got.isoformat() if isinstance(got, datetime) else ["not a datetime", repr(got)]
