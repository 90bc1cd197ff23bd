"""Money helpers.

Amounts are ``Decimal`` values rounded half-up to whole cents. Inputs may be
``Decimal``, ``int``, ``str`` or ``float``; a float is taken to mean the decimal
number it prints as (``2.675`` is 2.675, not the nearest binary fraction).
"""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_decimal(value):
    """Convert a supported number to ``Decimal``."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise TypeError("booleans are not amounts")
    if isinstance(value, (int, float)):
        return Decimal(value)
    if isinstance(value, str):
        return Decimal(value.strip())
    raise TypeError(f"unsupported amount type: {type(value).__name__}")


def round_money(value):
    """Round to whole cents, halves away from zero."""
    return to_decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def apply_rate(amount, rate):
    """Return ``amount * rate`` rounded to cents (tax, discount, fee...)."""
    return round_money(to_decimal(amount) * Decimal(rate))


def line_total(unit_price, quantity, tax_rate=0):
    """Gross total of an invoice line: net rounded to cents, plus rounded tax."""
    net = round_money(to_decimal(unit_price) * quantity)
    return net + apply_rate(net, tax_rate)


def split_evenly(total, parts):
    """Split ``total`` into ``parts`` amounts that differ by at most one cent
    and add up exactly to the rounded total."""
    if parts <= 0:
        raise ValueError("parts must be positive")
    cents = int(round_money(total) / CENT)
    base, remainder = divmod(cents, parts)
    return [
        (Decimal(base + (1 if i < remainder else 0)) * CENT).quantize(CENT)
        for i in range(parts)
    ]
