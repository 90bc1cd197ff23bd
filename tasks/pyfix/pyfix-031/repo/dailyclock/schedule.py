"""Schedules that fire at a fixed local time of day, optionally on some weekdays."""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .clock import as_utc, parse_days, parse_hhmm, parse_offset


@dataclass(frozen=True)
class DailySchedule:
    at: object                   # datetime.time, local to ``tz``
    tz: object = timezone.utc    # a fixed-offset datetime.timezone
    weekdays: frozenset = None   # local weekdays (Monday=0); None means every day

    @classmethod
    def from_spec(cls, at, tz="UTC", days=None):
        """``DailySchedule.from_spec("09:00", tz="+01:00", days="mon-fri")``"""
        weekdays = frozenset(parse_days(days)) if days else None
        return cls(parse_hhmm(at), parse_offset(tz), weekdays)

    def _fires_on(self, day):
        return self.weekdays is None or day.weekday() in self.weekdays

    def next_after(self, now):
        """First occurrence strictly after ``now``, as an aware datetime in ``tz``.

        ``now`` may be aware (any timezone) or naive (interpreted as UTC).
        """
        now = as_utc(now)
        day = now.date()
        for offset in range(8):
            candidate_day = day + timedelta(days=offset)
            if not self._fires_on(candidate_day):
                continue
            candidate = datetime.combine(candidate_day, self.at, tzinfo=self.tz)
            if candidate > now:
                return candidate
        raise RuntimeError("schedule has no occurrence within a week")

    def occurrences(self, start, end):
        """All occurrences ``t`` with ``start < t <= end``."""
        end = as_utc(end)
        current = self.next_after(start)
        result = []
        while current <= end:
            result.append(current)
            current = self.next_after(current)
        return result
