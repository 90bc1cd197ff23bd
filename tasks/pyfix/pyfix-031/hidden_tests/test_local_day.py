from datetime import datetime, timedelta, timezone

from dailyclock import DailySchedule

UTC = timezone.utc
NEW_YORK = timezone(timedelta(hours=-5))
LOS_ANGELES = timezone(timedelta(hours=-8))
TOKYO = timezone(timedelta(hours=9))
KOLKATA = timezone(timedelta(hours=5, minutes=30))
PARIS = timezone(timedelta(hours=1))


def test_west_of_utc_same_evening():
    sched = DailySchedule.from_spec("22:00", tz="-05:00")
    nxt = sched.next_after(datetime(2024, 1, 16, 2, 0, tzinfo=UTC))
    assert nxt == datetime(2024, 1, 15, 22, 0, tzinfo=NEW_YORK)
    assert nxt.utcoffset() == timedelta(hours=-5)


def test_west_of_utc_earlier_in_the_day():
    sched = DailySchedule.from_spec("22:00", tz="-05:00")
    nxt = sched.next_after(datetime(2024, 1, 15, 20, 0, tzinfo=UTC))
    assert nxt == datetime(2024, 1, 15, 22, 0, tzinfo=NEW_YORK)


def test_naive_now_is_treated_as_utc():
    sched = DailySchedule.from_spec("22:00", tz="-05:00")
    assert sched.next_after(datetime(2024, 1, 16, 2, 0)) == datetime(2024, 1, 15, 22, 0, tzinfo=NEW_YORK)


def test_now_in_a_third_timezone():
    sched = DailySchedule.from_spec("22:00", tz="-05:00")
    now = datetime(2024, 1, 16, 3, 0, tzinfo=PARIS)  # 02:00 UTC
    assert sched.next_after(now) == datetime(2024, 1, 15, 22, 0, tzinfo=NEW_YORK)


def test_weekday_uses_local_day_west():
    sched = DailySchedule.from_spec("18:00", tz="-08:00", days="fri")
    # Saturday 01:00 UTC is still Friday 17:00 in Los Angeles
    nxt = sched.next_after(datetime(2024, 3, 9, 1, 0, tzinfo=UTC))
    assert nxt == datetime(2024, 3, 8, 18, 0, tzinfo=LOS_ANGELES)


def test_weekly_east_of_utc_a_full_week_ahead():
    sched = DailySchedule.from_spec("07:00", tz="+09:00", days="mon")
    # Sunday 23:00 UTC is Monday 08:00 in Tokyo: today's run has passed
    nxt = sched.next_after(datetime(2024, 1, 14, 23, 0, tzinfo=UTC))
    assert nxt == datetime(2024, 1, 22, 7, 0, tzinfo=TOKYO)


def test_east_of_utc_same_local_morning():
    sched = DailySchedule.from_spec("09:00", tz="+09:00")
    nxt = sched.next_after(datetime(2024, 1, 14, 23, 0, tzinfo=UTC))
    assert nxt == datetime(2024, 1, 15, 9, 0, tzinfo=TOKYO)


def test_half_hour_offset_after_local_midnight():
    sched = DailySchedule.from_spec("00:15", tz="+05:30")
    nxt = sched.next_after(datetime(2024, 1, 10, 18, 30, tzinfo=UTC))
    assert nxt == datetime(2024, 1, 11, 0, 15, tzinfo=KOLKATA)


def test_occurrences_west_of_utc():
    sched = DailySchedule.from_spec("22:00", tz="-05:00")
    got = sched.occurrences(
        datetime(2024, 1, 16, 2, 0, tzinfo=UTC),
        datetime(2024, 1, 18, 3, 0, tzinfo=UTC),
    )
    assert got == [
        datetime(2024, 1, 15, 22, 0, tzinfo=NEW_YORK),
        datetime(2024, 1, 16, 22, 0, tzinfo=NEW_YORK),
        datetime(2024, 1, 17, 22, 0, tzinfo=NEW_YORK),
    ]
