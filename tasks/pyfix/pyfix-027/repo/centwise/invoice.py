"""A minimal invoice made of lines with per-line tax."""

from dataclasses import dataclass, field
from decimal import Decimal

from .money import apply_rate, round_money, to_decimal


@dataclass
class Line:
    description: str
    unit_price: Decimal
    quantity: int
    tax_rate: Decimal

    @property
    def net(self):
        return round_money(self.unit_price * self.quantity)

    @property
    def tax(self):
        return apply_rate(self.net, self.tax_rate)


@dataclass
class Invoice:
    lines: list = field(default_factory=list)
    discount_rate: object = 0

    def add(self, description, unit_price, quantity=1, tax_rate=0):
        self.lines.append(Line(description, to_decimal(unit_price), quantity, tax_rate))
        return self

    @property
    def subtotal(self):
        return sum((line.net for line in self.lines), Decimal("0.00"))

    @property
    def tax(self):
        return sum((line.tax for line in self.lines), Decimal("0.00"))

    @property
    def discount(self):
        return apply_rate(self.subtotal, self.discount_rate)

    @property
    def total(self):
        return self.subtotal - self.discount + self.tax
