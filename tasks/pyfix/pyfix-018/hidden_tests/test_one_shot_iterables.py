import io

import pytest

from chunkit import batched, chunk_stats, split_evenly, windowed


def test_split_evenly_generator():
    assert split_evenly((x for x in range(5)), 2) == [[0, 1, 2], [3, 4]]


def test_split_evenly_map_object():
    assert split_evenly(map(str, range(3)), 3) == [["0"], ["1"], ["2"]]


def test_split_evenly_file_lines():
    f = io.StringIO("a\nb\nc\nd\n")
    assert split_evenly(f, 3) == [["a\n", "b\n"], ["c\n"], ["d\n"]]


def test_split_evenly_iterator_fewer_items_than_parts():
    assert split_evenly(iter([1, 2]), 4) == [[1], [2], [], []]


def test_split_evenly_sequences_unchanged():
    assert split_evenly((1, 2, 3, 4, 5, 6, 7), 3) == [[1, 2, 3], [4, 5], [6, 7]]
    assert split_evenly("abcd", 2) == [["a", "b"], ["c", "d"]]
    assert split_evenly([], 2) == [[], []]


def test_split_evenly_sizes_property():
    for n in range(0, 12):
        for parts in range(1, 5):
            chunks = split_evenly(iter(range(n)), parts)
            assert len(chunks) == parts
            assert [x for c in chunks for x in c] == list(range(n))
            sizes = [len(c) for c in chunks]
            assert max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True)


def test_chunk_stats_iterator():
    assert chunk_stats(iter("abcdefg"), 3) == {"items": 7, "chunks": 3, "last_chunk": 1}


def test_chunk_stats_empty_and_list():
    assert chunk_stats(iter([]), 3) == {"items": 0, "chunks": 0, "last_chunk": 0}
    assert chunk_stats([1, 2, 3], 3) == {"items": 3, "chunks": 1, "last_chunk": 3}


def test_batched_and_windowed_with_generators():
    assert list(batched(iter(range(4)), 2)) == [[0, 1], [2, 3]]
    assert list(windowed((c for c in "abc"), 2)) == [("a", "b"), ("b", "c")]
