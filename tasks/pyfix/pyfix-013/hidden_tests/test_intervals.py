import pytest

from spans import Interval, gaps, merge, overlaps, total_length


def test_touching_intervals_merge():
    assert merge([Interval(1, 3), Interval(3, 5)]) == [Interval(1, 5)]


def test_chain_of_touching_intervals_unsorted():
    ivs = [(10, 11), (9, 10), (0, 1), (1, 2), (2, 3)]
    assert merge(ivs) == [Interval(0, 3), Interval(9, 11)]


def test_point_interval_touching():
    assert merge([(2, 2), (0, 2)]) == [Interval(0, 2)]


def test_gaps_ignore_touching():
    assert gaps([(0, 2), (2, 4), (6, 8)]) == [Interval(4, 6)]


def test_overlapping_and_contained():
    assert merge([(1, 10), (2, 3), (4, 12)]) == [Interval(1, 12)]


def test_disjoint_stay_separate():
    assert merge([(5, 6), (1, 2), (3, 4)]) == [Interval(1, 2), Interval(3, 4), Interval(5, 6)]
    assert gaps([(1, 2), (3, 4)]) == [Interval(2, 3)]


def test_merge_result_pairwise_disjoint():
    merged = merge([(0, 1), (1, 2), (4, 5), (5, 5), (2.5, 3)])
    for a, b in zip(merged, merged[1:]):
        assert not overlaps(a, b)


def test_total_length_with_touching():
    assert total_length([(0, 1), (1, 2), (2, 4)]) == 4


def test_invalid_interval():
    with pytest.raises(ValueError):
        merge([(0, 1), (5, 4)])
