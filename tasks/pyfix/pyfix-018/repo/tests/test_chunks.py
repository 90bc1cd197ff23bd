import pytest

from chunkit import batched, chunk_stats, split_evenly, windowed


def test_batched_generator():
    assert list(batched((i for i in range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]


def test_split_evenly_list():
    assert split_evenly([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert split_evenly(range(2), 4) == [[0], [1], [], []]


def test_windowed():
    assert list(windowed("abcd", 3)) == [("a", "b", "c"), ("b", "c", "d")]


def test_chunk_stats_list():
    assert chunk_stats(list(range(10)), 4) == {"items": 10, "chunks": 3, "last_chunk": 2}


def test_bad_sizes():
    with pytest.raises(ValueError):
        list(batched([1], 0))
    with pytest.raises(ValueError):
        split_evenly([1], 0)
