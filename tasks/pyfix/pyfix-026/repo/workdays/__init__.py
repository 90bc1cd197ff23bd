"""workdays - business day arithmetic."""

from .calendar import BusinessCalendar
from .ranges import date_range

__all__ = ["BusinessCalendar", "date_range"]
