from fractions import Fraction

from linalg import Matrix, det, inverse, rank, solve

ROWS = [[1, 2], [3, 4]]
ROWS3 = [[0, 2, 1], [1, 1, 1], [2, 4, 3]]


def test_det_leaves_input_unchanged():
    a = Matrix(ROWS)
    assert det(a) == -2
    assert a == Matrix(ROWS)


def test_det_with_row_swaps_leaves_input_unchanged():
    a = Matrix([[0, 1, 2], [1, 0, 3], [4, -3, 8]])
    assert det(a) == -2
    assert a == Matrix([[0, 1, 2], [1, 0, 3], [4, -3, 8]])


def test_rank_leaves_input_unchanged():
    m = Matrix(ROWS3)
    assert rank(m) == 2
    assert m == Matrix(ROWS3)


def test_results_after_det_are_correct():
    a = Matrix(ROWS)
    det(a)
    assert inverse(a) * Matrix(ROWS) == Matrix.identity(2)
    assert solve(a, [5, 6]) == [Fraction(-4), Fraction(9, 2)]


def test_copy_is_independent():
    a = Matrix(ROWS)
    b = a.copy()
    b[0, 0] = 99
    b.scale_row(1, Fraction(2))
    assert a == Matrix(ROWS)
    assert b == Matrix([[99, 2], [6, 8]])


def test_copy_row_operations_do_not_leak():
    a = Matrix(ROWS3)
    b = a.copy()
    b.add_multiple(1, 2, Fraction(-2))
    b.swap_rows(0, 2)
    assert a == Matrix(ROWS3)
    assert b.rows[0] == [0, 2, 1]


def test_inverse_and_solve_leave_input_unchanged():
    a = Matrix([[4, 7], [2, 6]])
    inv = inverse(a)
    assert inv * a == Matrix.identity(2)
    assert solve(a, [1, 2]) == [Fraction(-4, 5), Fraction(3, 5)]
    assert a == Matrix([[4, 7], [2, 6]])


def test_repeated_calls_consistent():
    a = Matrix([[2, -1, 0], [-1, 2, -1], [0, -1, 2]])
    assert [det(a) for _ in range(3)] == [4, 4, 4]
    assert rank(a) == 3
    assert inverse(a) * a == Matrix.identity(3)
