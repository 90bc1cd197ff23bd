from decimal import Decimal

from centwise import Invoice, apply_rate, line_total, round_money, split_evenly


def test_round_half_up_from_strings():
    assert round_money("2.675") == Decimal("2.68")
    assert round_money("-2.675") == Decimal("-2.68")
    assert round_money(3) == Decimal("3.00")


def test_apply_rate_with_strings():
    assert apply_rate("19.99", "0.075") == Decimal("1.50")


def test_line_total():
    assert line_total("4.99", 3, tax_rate="0.2") == Decimal("17.96")


def test_split_evenly_adds_up():
    parts = split_evenly("10.00", 3)
    assert parts == [Decimal("3.34"), Decimal("3.33"), Decimal("3.33")]
    assert sum(parts) == Decimal("10.00")


def test_invoice_total():
    inv = Invoice().add("widget", "4.99", 3, tax_rate="0.2")
    assert inv.total == Decimal("17.96")
