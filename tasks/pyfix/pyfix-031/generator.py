"""Generated check of pyfix-031: next_after / occurrences use the schedule's local date.

Schedules have a drawn local time, fixed UTC offset (west and east of UTC, half-hour ones,
UTC itself) and optional weekday list. Many cases put "now" in a local evening west of
UTC after midnight UTC, before that evening's occurrence (where the bug shows), or in an
early morning east of UTC on the only weekday of a weekly schedule, after its occurrence
(the answer is a full week ahead); the rest are anywhere, sometimes exactly at an
occurrence (which must be skipped: strictly after). "now" is an aware UTC datetime, an
aware datetime in some other offset, or a naive datetime (= UTC). Results travel as ISO
strings, which carry the offset the README promises (the schedule's own).
"""

OFFSETS = [
    "-05:00",
    "-0800",
    "-03:30",
    "-10:00",
    "-12:00",
    "-0100",
    "-04:00",
    "+01:00",
    "+05:30",
    "+0900",
    "+14:00",
    "+03:00",
    "Z",
    "UTC",
    "+00:00",
]
DAYS = [None, None, None, "mon-fri", "sat,sun", "fri", "mon", "tue,thu", "mon,wed-fri", "sun"]
OTHER = [-300, -480, 60, 120, 330, 540, 0, -600, 780]


def _offset_minutes(text):
    if text in ("Z", "UTC"):
        return 0
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return sign * (int(digits[:2]) * 60 + int(digits[2:]))


NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]  # 2024-01-01 was a Monday


def _hhmm(rng, minute):
    h, m = divmod(minute, 60)
    return f"{h}:{m:02d}" if rng.random() < 0.3 else f"{h:02d}:{m:02d}"


def _west_evening(rng):
    """Local evening in a zone west of UTC, after midnight UTC, before today's occurrence."""
    tz = rng.choice([o for o in OFFSETS if o[0] == "-"])
    off = -_offset_minutes(tz)
    at = rng.randint(1440 - off + 1, 1439)
    local_now = rng.randint(1440 - off, at - 1)
    local_day = rng.randint(0, 360)
    weekday = local_day % 7
    days = rng.choice(
        [
            None,
            None,
            NAMES[weekday],
            "mon-fri" if weekday < 5 else "sat,sun",
            NAMES[weekday] + "," + NAMES[(weekday + 1) % 7],
        ]
    )
    spec = {"at": _hhmm(rng, at), "tz": tz, "days": days}
    return spec, local_day * 1440 + local_now + off


def _east_weekly(rng):
    """Early morning of the only weekday in a zone east of UTC, after the occurrence."""
    tz = rng.choice([o for o in OFFSETS if o[0] == "+" and _offset_minutes(o) >= 120])
    off = _offset_minutes(tz)
    local_now = rng.randint(1, off - 1)
    at = rng.randint(0, local_now - 1)
    local_day = rng.randint(1, 355)
    spec = {"at": _hhmm(rng, at), "tz": tz, "days": NAMES[local_day % 7]}
    return spec, local_day * 1440 + local_now - off


def _anywhen(rng):
    spec = {"at": _hhmm(rng, rng.randint(0, 1439)), "tz": rng.choice(OFFSETS), "days": rng.choice(DAYS)}
    off = _offset_minutes(spec["tz"])
    h, m = (int(x) for x in spec["at"].split(":"))
    day = rng.randint(0, 360) * 1440
    if rng.random() < 0.25:
        # exactly at (or a minute around) an occurrence
        minute = (h * 60 + m - off + rng.choice([0, 0, -1, 1])) % 1440
    else:
        minute = rng.randint(0, 1439)
    return spec, day + minute


def _moment(rng, total_minutes, second):
    r = rng.random()
    if r < 0.5:
        tz = 0
    elif r < 0.75:
        tz = None  # naive, meaning UTC
    else:
        tz = rng.choice(OTHER)
    return {"utc_minutes": total_minutes, "second": second, "tz": tz}


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.42:
            spec, minutes = _west_evening(rng)
        elif r < 0.5:
            spec, minutes = _east_weekly(rng)
        else:
            spec, minutes = _anywhen(rng)
        second = rng.choice([0, 0, 0, rng.randint(1, 59)])
        start = _moment(rng, minutes, second)
        if rng.random() < 0.8:
            out.append({"fn": "next_after", "schedule": spec, "now": start})
        else:
            end = _moment(rng, minutes + rng.randint(0, 4 * 1440), rng.choice([0, 30]))
            out.append({"fn": "occurrences", "schedule": spec, "start": start, "end": end})
    return out


def _datetime(m):
    from datetime import datetime, timedelta, timezone

    utc = datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=m["utc_minutes"], seconds=m["second"])
    if m["tz"] is None:
        return utc.replace(tzinfo=None)
    return utc.astimezone(timezone(timedelta(minutes=m["tz"])))


def _iso(dt):
    from datetime import datetime

    if isinstance(dt, datetime):
        return dt.isoformat()
    return ["not a datetime", type(dt).__name__, repr(dt)]


def call(case):
    from dailyclock import DailySchedule

    spec = case["schedule"]
    sched = DailySchedule.from_spec(spec["at"], tz=spec["tz"], days=spec["days"])
    if case["fn"] == "next_after":
        return _iso(sched.next_after(_datetime(case["now"])))
    return [_iso(t) for t in sched.occurrences(_datetime(case["start"]), _datetime(case["end"]))]
