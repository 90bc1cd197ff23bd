"""Small time helpers: parsing of clock times, offsets and weekday lists."""

import re
from datetime import time, timedelta, timezone

DAY_NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

_HHMM_RE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_OFFSET_RE = re.compile(r"^([+-])(\d{2}):?(\d{2})$")


def as_utc(dt):
    """Return ``dt`` as an aware UTC datetime; naive datetimes are taken to be UTC."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def parse_hhmm(text):
    """``"7:30"`` -> ``time(7, 30)``."""
    match = _HHMM_RE.match(text.strip())
    if not match:
        raise ValueError(f"invalid time of day: {text!r}")
    return time(int(match.group(1)), int(match.group(2)))


def parse_offset(text):
    """``"Z"``, ``"UTC"``, ``"+05:30"`` or ``"-0500"`` -> ``datetime.timezone``."""
    text = text.strip()
    if text.upper() in ("Z", "UTC"):
        return timezone.utc
    match = _OFFSET_RE.match(text)
    if not match:
        raise ValueError(f"invalid UTC offset: {text!r}")
    sign, hours, minutes = match.groups()
    delta = timedelta(hours=int(hours), minutes=int(minutes))
    return timezone(-delta if sign == "-" else delta)


def parse_days(text):
    """``"mon-fri"``, ``"sat,sun"`` or ``"mon,wed-thu"`` -> set of weekday numbers
    (Monday is 0, as in ``date.weekday()``)."""
    days = set()
    for part in text.lower().split(","):
        part = part.strip()
        first, _, last = part.partition("-")
        try:
            lo = DAY_NAMES.index(first)
            hi = DAY_NAMES.index(last) if last else lo
        except ValueError:
            raise ValueError(f"invalid day specification: {part!r}") from None
        if hi < lo:
            raise ValueError(f"invalid day range: {part!r}")
        days.update(range(lo, hi + 1))
    return days
