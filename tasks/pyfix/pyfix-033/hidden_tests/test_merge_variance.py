import random
import statistics

import pytest

from streamstats import GroupedStats, RunningStats


def test_two_shards_with_different_means():
    merged = RunningStats.from_values([1, 2, 3]) + RunningStats.from_values([10, 11, 12])
    data = [1, 2, 3, 10, 11, 12]
    assert merged.n == 6
    assert merged.mean == pytest.approx(6.5)
    assert merged.variance == pytest.approx(statistics.pvariance(data))
    assert merged.sample_variance == pytest.approx(statistics.variance(data))
    assert merged.stdev == pytest.approx(statistics.pstdev(data))


def test_unequal_shard_sizes():
    left, right = [5.0], [1.0, 2.0, 3.0, 4.0, 100.0]
    merged = RunningStats.from_values(left) + RunningStats.from_values(right)
    assert merged.variance == pytest.approx(statistics.pvariance(left + right))


def test_shards_with_equal_means():
    merged = RunningStats.from_values([1, 3]) + RunningStats.from_values([0, 4])
    assert merged.variance == pytest.approx(statistics.pvariance([1, 3, 0, 4]))


def test_merge_order_does_not_matter():
    a = RunningStats.from_values([1, 2, 3, 4])
    b = RunningStats.from_values([40, 41])
    assert (a + b).variance == pytest.approx((b + a).variance)
    assert (a + b).mean == pytest.approx((b + a).mean)


def test_many_merges_equal_single_pass():
    rng = random.Random(1234)
    data = [rng.gauss(50, 15) + 10 * (i % 7) for i in range(700)]
    total = RunningStats()
    for i in range(0, len(data), 50):
        total.update(RunningStats.from_values(data[i:i + 50]))
    single = RunningStats.from_values(data)
    assert total.n == single.n == 700
    assert total.mean == pytest.approx(single.mean)
    assert total.variance == pytest.approx(single.variance, rel=1e-9)
    assert total.min == single.min and total.max == single.max


def test_update_returns_self_and_leaves_other_unchanged():
    a = RunningStats.from_values([1.0, 2.0])
    b = RunningStats.from_values([7.0, 9.0])
    assert a.update(b) is a
    assert (b.n, b.mean, b.variance) == (2, 8.0, 1.0)


def test_grouped_merge_matches_all_values():
    pairs = [("/a", 10.0), ("/b", 3.0), ("/a", 12.0), ("/b", 4.0)]
    more = [("/a", 30.0), ("/a", 34.0), ("/c", 1.0)]
    g = GroupedStats.from_pairs(pairs).merge(GroupedStats.from_pairs(more))
    summary = g.summary()
    assert summary["/a"]["n"] == 4
    assert summary["/a"]["mean"] == pytest.approx(21.5)
    assert summary["/a"]["stdev"] == pytest.approx(statistics.pstdev([10.0, 12.0, 30.0, 34.0]))
    assert summary["/b"]["stdev"] == pytest.approx(0.5)
    assert summary["/c"] == {"n": 1, "mean": 1.0, "stdev": 0.0, "min": 1.0, "max": 1.0}


def test_merge_with_empty_still_works():
    s = RunningStats.from_values([4.0, 8.0])
    empty = RunningStats()
    assert (empty + s).variance == pytest.approx(4.0)
    assert (s + empty).variance == pytest.approx(4.0)
