"""centwise - money arithmetic with Decimal and half-up rounding to cents."""

from .invoice import Invoice
from .money import CENT, apply_rate, line_total, round_money, split_evenly, to_decimal

__all__ = [
    "CENT",
    "Invoice",
    "apply_rate",
    "line_total",
    "round_money",
    "split_evenly",
    "to_decimal",
]
