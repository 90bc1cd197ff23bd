from datetime import datetime, timedelta, timezone

from cronlite import CronExpr


def test_both_day_fields_match_on_weekday():
    expr = CronExpr("30 8 1 * mon")
    assert expr.matches(datetime(2024, 2, 5, 8, 30))  # Monday, not the 1st


def test_both_day_fields_match_on_day_of_month():
    expr = CronExpr("30 8 1 * mon")
    assert expr.matches(datetime(2024, 2, 1, 8, 30))  # Thursday the 1st


def test_both_day_fields_neither_matches():
    expr = CronExpr("30 8 1 * mon")
    assert not expr.matches(datetime(2024, 2, 6, 8, 30))  # Tuesday the 6th
    assert not expr.matches(datetime(2024, 2, 5, 8, 31))  # right day, wrong minute


def test_only_weekday_restricted():
    expr = CronExpr("0 0 * * 1")
    assert expr.matches(datetime(2024, 1, 8))
    assert not expr.matches(datetime(2024, 1, 9))


def test_only_day_of_month_restricted():
    expr = CronExpr("0 0 13 * *")
    assert expr.matches(datetime(2024, 9, 13))
    assert not expr.matches(datetime(2024, 9, 14))


def test_star_step_does_not_count_as_restriction():
    expr = CronExpr("0 0 */2 * mon")
    assert expr.matches(datetime(2024, 1, 1))       # odd day and Monday
    assert not expr.matches(datetime(2024, 1, 8))   # Monday, even day
    assert not expr.matches(datetime(2024, 1, 3))   # odd day, Wednesday


def test_month_still_applies_with_either_day_field():
    expr = CronExpr("0 0 1 jan mon")
    assert expr.matches(datetime(2024, 1, 15))      # Monday in January
    assert not expr.matches(datetime(2024, 2, 1))   # the 1st, but February
    assert not expr.matches(datetime(2024, 2, 5))   # Monday, but February


def test_next_after_uses_either_day_field():
    expr = CronExpr("30 8 1 * mon")
    assert expr.next_after(datetime(2024, 1, 2)) == datetime(2024, 1, 8, 8, 30)
    assert expr.next_after(datetime(2024, 1, 29, 9, 0)) == datetime(2024, 2, 1, 8, 30)


def test_next_after_friday_or_fifteenth_keeps_tzinfo():
    tz = timezone(timedelta(hours=2))
    expr = CronExpr("0 12 15 * fri")
    got = expr.next_after(datetime(2024, 3, 7, 13, 0, tzinfo=tz))
    assert got == datetime(2024, 3, 8, 12, 0, tzinfo=tz)


def test_impossible_day_of_month_rescued_by_weekday():
    expr = CronExpr("0 0 30 2 mon")
    assert expr.next_after(datetime(2024, 1, 31)) == datetime(2024, 2, 5)


def test_leap_day_only_schedule():
    expr = CronExpr("0 0 29 2 *")
    assert expr.next_after(datetime(2024, 3, 1)) == datetime(2028, 2, 29)
