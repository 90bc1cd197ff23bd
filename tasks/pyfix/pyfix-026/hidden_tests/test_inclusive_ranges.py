from datetime import date, timedelta

from workdays import BusinessCalendar, date_range


def test_date_range_includes_end():
    days = list(date_range(date(2024, 1, 30), date(2024, 2, 2)))
    assert days == [date(2024, 1, 30), date(2024, 1, 31), date(2024, 2, 1), date(2024, 2, 2)]


def test_date_range_single_day():
    assert list(date_range(date(2024, 2, 29), date(2024, 2, 29))) == [date(2024, 2, 29)]


def test_date_range_end_before_start_is_empty():
    assert list(date_range(date(2024, 3, 2), date(2024, 3, 1))) == []


def test_date_range_with_step():
    days = list(date_range(date(2024, 1, 1), date(2024, 1, 15), step=timedelta(days=7)))
    assert days == [date(2024, 1, 1), date(2024, 1, 8), date(2024, 1, 15)]


def test_full_working_week():
    cal = BusinessCalendar()
    assert cal.count_business_days(date(2024, 3, 4), date(2024, 3, 8)) == 5


def test_single_business_day_and_single_weekend_day():
    cal = BusinessCalendar()
    assert cal.count_business_days(date(2024, 3, 4), date(2024, 3, 4)) == 1
    assert cal.count_business_days(date(2024, 3, 9), date(2024, 3, 9)) == 0


def test_range_ending_on_weekend_and_holiday():
    cal = BusinessCalendar(holidays={date(2024, 12, 25), date(2024, 12, 26)})
    # Mon 23 .. Sun 29 December: 23, 24, 27 are working days
    assert cal.count_business_days(date(2024, 12, 23), date(2024, 12, 29)) == 3


def test_business_days_yields_end_date():
    cal = BusinessCalendar(weekend={4, 5})  # Friday/Saturday weekend
    days = list(cal.business_days(date(2024, 3, 7), date(2024, 3, 10)))
    assert days == [date(2024, 3, 7), date(2024, 3, 10)]


def test_add_business_days_still_works():
    cal = BusinessCalendar()
    assert cal.add_business_days(date(2024, 3, 8), 5) == date(2024, 3, 15)
