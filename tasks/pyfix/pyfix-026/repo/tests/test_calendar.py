from datetime import date

from workdays import BusinessCalendar


def test_weekend_and_holidays():
    cal = BusinessCalendar(holidays={date(2024, 12, 25)})
    assert cal.is_business_day(date(2024, 12, 24))
    assert not cal.is_business_day(date(2024, 12, 25))
    assert not cal.is_business_day(date(2024, 12, 28))  # Saturday


def test_add_business_days_skips_weekend():
    cal = BusinessCalendar()
    assert cal.add_business_days(date(2024, 3, 8), 1) == date(2024, 3, 11)
    assert cal.add_business_days(date(2024, 3, 11), -1) == date(2024, 3, 8)
    assert cal.add_business_days(date(2024, 3, 6), 0) == date(2024, 3, 6)
