"""Cron expressions: ``minute hour day-of-month month day-of-week``."""

from datetime import datetime, time, timedelta

from .fields import DAY_NAMES, MONTH_NAMES, parse_field

# Longest gap between two matches of a valid expression: Feb 29 of the next leap
# year, which can be up to 8 years away (e.g. 2096 -> 2104).
_MAX_DAYS = 366 * 8 + 1


class CronExpr:
    def __init__(self, text):
        fields = text.split()
        if len(fields) != 5:
            raise ValueError(f"expected 5 fields, got {len(fields)}: {text!r}")
        self.text = text
        self.minutes = parse_field(fields[0], 0, 59)
        self.hours = parse_field(fields[1], 0, 23)
        self.days = parse_field(fields[2], 1, 31)
        self.months = parse_field(fields[3], 1, 12, MONTH_NAMES)
        # 0 and 7 both mean Sunday.
        self.weekdays = frozenset(d % 7 for d in parse_field(fields[4], 0, 7, DAY_NAMES))

    def __repr__(self):
        return f"CronExpr({self.text!r})"

    def _day_matches(self, day):
        cron_weekday = (day.weekday() + 1) % 7  # cron counts from Sunday = 0
        return (
            day.month in self.months
            and day.day in self.days
            and cron_weekday in self.weekdays
        )

    def matches(self, dt):
        """True if the minute containing ``dt`` is selected by the expression."""
        return dt.hour in self.hours and dt.minute in self.minutes and self._day_matches(dt.date())

    def next_after(self, dt):
        """First matching minute strictly after ``dt`` (keeps ``dt.tzinfo``)."""
        start = dt.replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.date()
        for _ in range(_MAX_DAYS):
            if self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        candidate = datetime.combine(day, time(hour, minute), tzinfo=dt.tzinfo)
                        if candidate >= start:
                            return candidate
            day += timedelta(days=1)
        raise ValueError(f"{self.text!r} never matches")
