import pytest

from binhist import cumulative, histogram, linear_edges


def test_edges():
    assert linear_edges(0, 4, 4) == [0.0, 1.0, 2.0, 3.0, 4]


def test_edges_validation():
    with pytest.raises(ValueError):
        linear_edges(1, 1, 3)
    with pytest.raises(ValueError):
        linear_edges(0, 1, 0)


def test_histogram_with_explicit_range():
    counts, edges = histogram([0.5, 1.5, 1.7, 3.2], bins=4, range=(0, 4))
    assert counts == [1, 2, 0, 1]


def test_cumulative():
    assert cumulative([1, 2, 0, 1]) == [1, 3, 3, 4]
