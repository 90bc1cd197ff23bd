from fractions import Fraction

import pytest

from linalg import Matrix, SingularMatrixError, det, inverse, rank, solve


def test_det_values():
    assert det(Matrix([[2, 1], [1, 3]])) == 5
    assert det(Matrix([[0, 1], [1, 0]])) == -1
    assert det(Matrix([[1, 2], [2, 4]])) == 0


def test_inverse_and_solve():
    a = Matrix([[2, 1], [1, 3]])
    assert inverse(a) * a == Matrix.identity(2)
    assert solve(a, [3, 5]) == [Fraction(4, 5), Fraction(7, 5)]


def test_singular_inverse():
    with pytest.raises(SingularMatrixError):
        inverse(Matrix([[1, 2], [2, 4]]))


def test_rank_and_transpose():
    assert rank(Matrix([[1, 2, 3], [2, 4, 6]])) == 1
    assert Matrix([[1, 2], [3, 4]]).transpose() == Matrix([[1, 3], [2, 4]])


def test_ragged_rows_rejected():
    with pytest.raises(ValueError):
        Matrix([[1, 2], [3]])
