"""dailyclock - daily / weekly schedules in fixed-offset timezones."""

from .clock import as_utc, parse_days, parse_hhmm, parse_offset
from .schedule import DailySchedule

__all__ = ["DailySchedule", "as_utc", "parse_days", "parse_hhmm", "parse_offset"]
