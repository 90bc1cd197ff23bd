"""A calendar of working days with configurable weekend and holidays."""

from .ranges import ONE_DAY, date_range

SATURDAY, SUNDAY = 5, 6


class BusinessCalendar:
    def __init__(self, holidays=(), weekend=(SATURDAY, SUNDAY)):
        self.holidays = frozenset(holidays)
        self.weekend = frozenset(weekend)

    def is_business_day(self, day):
        return day.weekday() not in self.weekend and day not in self.holidays

    def business_days(self, start, end):
        """Yield the business days between ``start`` and ``end`` (both inclusive)."""
        for day in date_range(start, end):
            if self.is_business_day(day):
                yield day

    def count_business_days(self, start, end):
        """Number of business days between ``start`` and ``end`` (both inclusive)."""
        return sum(1 for _ in self.business_days(start, end))

    def add_business_days(self, start, n):
        """Return the date ``n`` business days after ``start`` (``n`` may be negative).

        ``start`` itself is not counted, so ``add_business_days(friday, 1)`` is
        the following Monday.
        """
        step = ONE_DAY if n >= 0 else -ONE_DAY
        remaining = abs(n)
        day = start
        while remaining:
            day += step
            if self.is_business_day(day):
                remaining -= 1
        return day
