import pytest

from spans import Interval, merge, overlaps, total_length


def test_merge_overlapping():
    assert merge([(1, 4), (2, 6), (8, 9)]) == [Interval(1, 6), Interval(8, 9)]


def test_merge_empty():
    assert merge([]) == []


def test_overlaps_touching():
    assert overlaps(Interval(1, 3), Interval(3, 5))
    assert not overlaps(Interval(1, 2), Interval(3, 5))


def test_total_length():
    assert total_length([(0, 2), (1, 3), (10, 11)]) == 4


def test_reversed_interval_rejected():
    with pytest.raises(ValueError):
        merge([(3, 1)])
