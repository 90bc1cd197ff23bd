from datetime import datetime

import pytest

from cronlite import CronExpr, parse_field


def test_parse_field():
    assert parse_field("*/15", 0, 59) == {0, 15, 30, 45}
    assert parse_field("1-10/3", 1, 31) == {1, 4, 7, 10}
    assert parse_field("mon-wed", 0, 7, ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]) == {1, 2, 3}
    with pytest.raises(ValueError):
        parse_field("61", 0, 59)


def test_business_hours():
    expr = CronExpr("*/15 9-17 * * mon-fri")
    assert expr.matches(datetime(2024, 3, 4, 9, 45))
    assert not expr.matches(datetime(2024, 3, 9, 9, 45))  # Saturday
    assert expr.next_after(datetime(2024, 3, 8, 17, 50)) == datetime(2024, 3, 11, 9, 0)


def test_sunday_as_zero_or_seven():
    assert CronExpr("0 0 * * 0").matches(datetime(2024, 3, 10))
    assert CronExpr("0 0 * * 7").matches(datetime(2024, 3, 10))


def test_monthly():
    assert CronExpr("0 6 1 * *").next_after(datetime(2024, 1, 15)) == datetime(2024, 2, 1, 6, 0)
