from decimal import Decimal

import pytest

from centwise import Invoice, apply_rate, line_total, round_money, split_evenly, to_decimal


@pytest.mark.parametrize("value, expected", [
    (2.675, "2.68"),
    (1.005, "1.01"),
    (-1.015, "-1.02"),
    (0.125, "0.13"),
])
def test_round_money_float_behaves_like_its_decimal_text(value, expected):
    assert round_money(value) == Decimal(expected)
    assert round_money(value) == round_money(repr(value))


def test_to_decimal_float_is_printed_value():
    assert to_decimal(0.1) == Decimal("0.1")
    assert to_decimal(7) == Decimal(7)


def test_apply_rate_with_float_rate():
    assert apply_rate("1.00", 0.015) == Decimal("0.02")
    assert apply_rate(Decimal("7.10"), 0.15) == Decimal("1.07")


def test_line_total_with_float_tax_rate():
    assert line_total("10.00", 1, tax_rate=0.0725) == Decimal("10.73")
    assert line_total(10.0, 1, tax_rate=0.0725) == line_total("10.00", 1, tax_rate="0.0725")


def test_invoice_with_float_inputs():
    inv = Invoice(discount_rate=0.05)
    inv.add("cable", 3.30, 1, tax_rate=0.0725)
    inv.add("plug", 7.10, 1, tax_rate=0.15)
    assert inv.subtotal == Decimal("10.40")
    assert inv.tax == Decimal("0.24") + Decimal("1.07")
    assert inv.discount == Decimal("0.52")
    assert inv.total == Decimal("10.40") - Decimal("0.52") + Decimal("1.31")


def test_string_and_decimal_inputs_unchanged():
    assert round_money(Decimal("2.665")) == Decimal("2.67")
    assert apply_rate("19.99", "0.075") == Decimal("1.50")
    assert split_evenly(Decimal("0.05"), 2) == [Decimal("0.03"), Decimal("0.02")]


def test_booleans_rejected():
    with pytest.raises(TypeError):
        round_money(True)
