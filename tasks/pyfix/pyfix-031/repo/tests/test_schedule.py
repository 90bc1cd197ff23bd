from datetime import datetime, time, timedelta, timezone

import pytest

from dailyclock import DailySchedule, parse_days, parse_offset

UTC = timezone.utc


def test_parse_helpers():
    assert parse_offset("+05:30") == timezone(timedelta(hours=5, minutes=30))
    assert parse_offset("-0500") == timezone(timedelta(hours=-5))
    assert parse_days("mon-wed,sun") == {0, 1, 2, 6}
    with pytest.raises(ValueError):
        parse_days("fri-mon")


def test_utc_daily():
    s = DailySchedule(time(9, 0))
    assert s.next_after(datetime(2024, 1, 1, 8, 0, tzinfo=UTC)) == datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
    assert s.next_after(datetime(2024, 1, 1, 9, 0, tzinfo=UTC)) == datetime(2024, 1, 2, 9, 0, tzinfo=UTC)


def test_weekdays_only():
    s = DailySchedule.from_spec("09:30", tz="+01:00", days="mon-fri")
    nxt = s.next_after(datetime(2024, 3, 8, 12, 0, tzinfo=UTC))  # Friday
    assert nxt == datetime(2024, 3, 11, 9, 30, tzinfo=parse_offset("+01:00"))


def test_naive_now_is_utc():
    s = DailySchedule.from_spec("12:00")
    assert s.next_after(datetime(2024, 5, 1, 11, 59)) == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
