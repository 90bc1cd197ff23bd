import statistics

import pytest

from streamstats import GroupedStats, RunningStats


def test_push_matches_statistics_module():
    data = [2, 4, 4, 4, 5, 5, 7, 9]
    s = RunningStats.from_values(data)
    assert s.n == 8
    assert s.mean == pytest.approx(5.0)
    assert s.variance == pytest.approx(statistics.pvariance(data))
    assert s.sample_variance == pytest.approx(statistics.variance(data))
    assert s.stdev == pytest.approx(2.0)


def test_empty():
    s = RunningStats()
    assert s.variance == 0.0
    assert s.as_dict() == {"n": 0, "mean": 0.0, "stdev": 0.0, "min": None, "max": None}


def test_merge_with_empty_side():
    s = RunningStats.from_values([1, 2, 3])
    assert (s + RunningStats()).variance == pytest.approx(s.variance)
    assert (RunningStats() + s).variance == pytest.approx(s.variance)


def test_grouped_counts():
    g = GroupedStats.from_pairs([("/a", 10.0), ("/b", 3.0), ("/a", 12.0)])
    assert g.keys() == ["/a", "/b"]
    assert g["/a"].n == 2
    assert g["/a"].mean == pytest.approx(11.0)
