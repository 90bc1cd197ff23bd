"""Generated check of pyfix-026: inclusive date ranges and business-day counts.

Each case builds a fresh BusinessCalendar (drawn weekend and holidays near the period)
and asks date_range / business_days / count_business_days over a drawn period (often a
single day, sometimes an end before the start), or add_business_days / is_business_day,
which already worked and must keep working. Dates travel as ISO strings.
"""

WEEKENDS = [None, None, None, [4, 5], [5, 6], [6], [0, 6], [4]]


def _date(rng):
    # ordinal of 2023-01-01 is 738521; about three years of dates
    return 738521 + rng.randint(0, 1090)


def _iso(ordinal):
    import datetime

    return datetime.date.fromordinal(ordinal).isoformat()


def _calendar(rng, start, end):
    lo, hi = min(start, end), max(start, end)
    holidays = sorted({_iso(rng.randint(lo - 2, hi + 2)) for _ in range(rng.randint(0, 3))})
    return {"weekend": rng.choice(WEEKENDS), "holidays": holidays}


def _period(rng):
    start = _date(rng)
    r = rng.random()
    if r < 0.2:
        end = start
    elif r < 0.9:
        end = start + rng.randint(1, 24)
    else:
        end = start - rng.randint(1, 5)
    return start, end


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        start, end = _period(rng)
        if r < 0.25:
            case = {"fn": "date_range", "start": _iso(start), "end": _iso(end)}
            if rng.random() < 0.35:
                step = rng.choice([1, 2, 3, 7])
                if step > 1 and end > start and rng.random() < 0.6:
                    end = start + step * rng.randint(1, 4)  # end lands on a step
                    case["end"] = _iso(end)
                case["step"] = step
            elif rng.random() < 0.05:
                case["step"] = rng.choice([0, -1])
            out.append(case)
            continue
        case = {"start": _iso(start), "end": _iso(end), "calendar": _calendar(rng, start, end)}
        if r < 0.6:
            case["fn"] = "count_business_days"
        elif r < 0.85:
            case["fn"] = "business_days"
        elif r < 0.95:
            case["fn"] = "add_business_days"
            case["n"] = rng.randint(-8, 8)
        else:
            case["fn"] = "is_business_day"
        out.append(case)
    return out


def call(case):
    from datetime import date, timedelta

    from workdays import BusinessCalendar, date_range

    start, end = date.fromisoformat(case["start"]), date.fromisoformat(case["end"])
    if case["fn"] == "date_range":
        if "step" in case:
            days = date_range(start, end, step=timedelta(days=case["step"]))
        else:
            days = date_range(start, end)
        return [d.isoformat() for d in days]
    spec = case["calendar"]
    holidays = {date.fromisoformat(h) for h in spec["holidays"]}
    if spec["weekend"] is None:
        cal = BusinessCalendar(holidays=holidays)
    else:
        cal = BusinessCalendar(holidays=holidays, weekend=set(spec["weekend"]))
    fn = case["fn"]
    if fn == "count_business_days":
        return cal.count_business_days(start, end)
    if fn == "business_days":
        return [d.isoformat() for d in cal.business_days(start, end)]
    if fn == "add_business_days":
        return cal.add_business_days(start, case["n"]).isoformat()
    return cal.is_business_day(start)
