from binhist import bin_index, histogram, linear_edges


def test_counts_add_up_with_data_range():
    counts, edges = histogram([1, 2, 3, 4, 5], bins=4)
    assert counts == [1, 1, 1, 2]
    assert sum(counts) == 5


def test_value_on_upper_range_limit_is_counted():
    counts, _ = histogram([0, 2.5, 10], bins=5, range=(0, 10))
    assert counts == [1, 1, 0, 0, 1]


def test_values_outside_range_are_ignored():
    counts, _ = histogram([-0.1, 0, 10, 10.001, 99], bins=2, range=(0, 10))
    assert counts == [1, 1]


def test_interior_edges_are_half_open():
    counts, _ = histogram([1.0, 2.0, 3.0], bins=4, range=(0, 4))
    assert counts == [0, 1, 1, 1]


def test_bin_index_boundaries():
    edges = linear_edges(0, 3, 3)
    assert bin_index(0, edges) == 0
    assert bin_index(1, edges) == 1
    assert bin_index(2.999, edges) == 2
    assert bin_index(3, edges) == 2
    assert bin_index(3.0001, edges) is None
    assert bin_index(-1, edges) is None


def test_single_bin_contains_both_ends():
    counts, _ = histogram([2, 3, 5], bins=1)
    assert counts == [3]


def test_all_equal_values():
    counts, edges = histogram([7, 7, 7], bins=3)
    assert sum(counts) == 3
    assert counts[1] == 3


def test_float_samples_total():
    samples = [0.12, 0.5, 0.33, 0.91, 0.77, 0.05, 0.91]
    counts, _ = histogram(samples, bins=7)
    assert sum(counts) == len(samples)
