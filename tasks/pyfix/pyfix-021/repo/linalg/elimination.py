"""Gaussian elimination: determinant, rank, inverse and linear solve.

None of these functions modify the matrices passed to them; they work on a
copy.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

from .matrix import Matrix


class SingularMatrixError(ValueError):
    """The matrix has no inverse / the system has no unique solution."""


def _require_square(m: Matrix) -> int:
    n, k = m.shape
    if n != k:
        raise ValueError(f"matrix must be square, got {m.shape}")
    return n


def _row_echelon(m: Matrix, columns: int) -> tuple[Matrix, list[int], int]:
    """Forward elimination on a copy of ``m`` over its first ``columns`` columns.

    Returns the reduced copy, the pivot column of each pivot row, and the
    number of row swaps performed.
    """
    a = m.copy()
    rows = a.shape[0]
    pivots: list[int] = []
    swaps = 0
    r = 0
    for c in range(columns):
        pivot = next((i for i in range(r, rows) if a[i, c] != 0), None)
        if pivot is None:
            continue
        if pivot != r:
            a.swap_rows(pivot, r)
            swaps += 1
        for i in range(r + 1, rows):
            if a[i, c] != 0:
                a.add_multiple(r, i, -a[i, c] / a[r, c])
        pivots.append(c)
        r += 1
        if r == rows:
            break
    return a, pivots, swaps


def det(m: Matrix) -> Fraction:
    n = _require_square(m)
    a, pivots, swaps = _row_echelon(m, n)
    if len(pivots) < n:
        return Fraction(0)
    result = Fraction(-1 if swaps % 2 else 1)
    for i in range(n):
        result *= a[i, i]
    return result


def rank(m: Matrix) -> int:
    return len(_row_echelon(m, m.shape[1])[1])


def _reduce(aug: Matrix, n: int) -> Matrix:
    """Gauss-Jordan on ``[A | B]`` with square ``A`` (n x n): returns ``[I | A^-1 B]``."""
    a, pivots, _ = _row_echelon(aug, n)
    if len(pivots) < n:
        raise SingularMatrixError("matrix is singular")
    for r in range(n - 1, -1, -1):
        a.scale_row(r, 1 / a[r, r])
        for i in range(r):
            if a[i, r] != 0:
                a.add_multiple(r, i, -a[i, r])
    return a


def inverse(m: Matrix) -> Matrix:
    n = _require_square(m)
    reduced = _reduce(m.augment(Matrix.identity(n)), n)
    return Matrix([row[n:] for row in reduced.rows])


def solve(m: Matrix, b: Sequence[int | Fraction]) -> list[Fraction]:
    """Solve ``m x = b`` for square, non-singular ``m``."""
    n = _require_square(m)
    if len(b) != n:
        raise ValueError("right-hand side has the wrong length")
    reduced = _reduce(m.augment(Matrix([[x] for x in b])), n)
    return reduced.column(n)
