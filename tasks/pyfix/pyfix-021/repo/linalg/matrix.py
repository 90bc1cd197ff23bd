"""A small dense matrix of exact numbers."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable


class Matrix:
    def __init__(self, rows: Iterable[Iterable[int | Fraction]]) -> None:
        self.rows: list[list[Fraction]] = [[Fraction(x) for x in row] for row in rows]
        widths = {len(row) for row in self.rows}
        if len(widths) > 1:
            raise ValueError("all rows must have the same length")

    @classmethod
    def identity(cls, n: int) -> "Matrix":
        return cls([[1 if i == j else 0 for j in range(n)] for i in range(n)])

    @classmethod
    def _wrap(cls, rows: list[list[Fraction]]) -> "Matrix":
        """Build a matrix around already validated rows, without converting them."""
        m = cls.__new__(cls)
        m.rows = rows
        return m

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0]) if self.rows else 0

    def copy(self) -> "Matrix":
        return Matrix._wrap(list(self.rows))

    def __getitem__(self, pos: tuple[int, int]) -> Fraction:
        i, j = pos
        return self.rows[i][j]

    def __setitem__(self, pos: tuple[int, int], value: int | Fraction) -> None:
        i, j = pos
        self.rows[i][j] = Fraction(value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Matrix):
            return NotImplemented
        return self.rows == other.rows

    def __repr__(self) -> str:
        return f"Matrix({[[str(x) for x in row] for row in self.rows]})"

    def __mul__(self, other: "Matrix") -> "Matrix":
        n, k = self.shape
        k2, m = other.shape
        if k != k2:
            raise ValueError(f"cannot multiply {self.shape} by {other.shape}")
        cols = list(zip(*other.rows))
        return Matrix._wrap([[sum((a * b for a, b in zip(row, col)), Fraction(0)) for col in cols]
                             for row in self.rows])

    def transpose(self) -> "Matrix":
        return Matrix._wrap([list(col) for col in zip(*self.rows)])

    def augment(self, other: "Matrix") -> "Matrix":
        """``[self | other]``: a new matrix with ``other``'s columns appended."""
        if len(self.rows) != len(other.rows):
            raise ValueError("row counts differ")
        return Matrix._wrap([a + b for a, b in zip(self.rows, other.rows)])

    def column(self, j: int) -> list[Fraction]:
        return [row[j] for row in self.rows]

    # In-place elementary row operations (used by elimination.py).

    def swap_rows(self, i: int, k: int) -> None:
        self.rows[i], self.rows[k] = self.rows[k], self.rows[i]

    def scale_row(self, i: int, factor: Fraction) -> None:
        row = self.rows[i]
        for j in range(len(row)):
            row[j] *= factor

    def add_multiple(self, src: int, dst: int, factor: Fraction) -> None:
        """``row[dst] += factor * row[src]``."""
        s, d = self.rows[src], self.rows[dst]
        for j in range(len(d)):
            d[j] += factor * s[j]
