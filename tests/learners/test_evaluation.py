"""The intervals the demo reports: Wilson per proportion, Newcombe's hybrid score for a difference."""

from __future__ import annotations

import pytest

from learners.evaluation import difference_interval, wilson


def test_wilson_matches_known_values_and_stays_inside_zero_one() -> None:
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)  # not the degenerate Wald (0, 0)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    lo, hi = wilson(11, 48)
    assert lo == pytest.approx(0.1331, abs=1e-4) and hi == pytest.approx(0.3654, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_the_difference_interval_excludes_zero_only_for_a_real_gap() -> None:
    d, lo, hi = difference_interval(11, 48, 26, 48)
    assert d == pytest.approx(0.3125) and lo == pytest.approx(0.1180, abs=1e-4) and hi > d
    _, lo_same, hi_same = difference_interval(20, 48, 22, 48)
    assert lo_same < 0 < hi_same  # 42% -> 46% on 48 samples is not evidence of learning


def test_pass_at_k_is_the_unbiased_estimator_and_its_interval_never_collapses() -> None:
    from math import comb

    from learners.evaluation import pass_at_k, pass_at_k_of_task

    for n, c, k in [(4, 1, 2), (10, 3, 5), (5, 0, 1), (5, 5, 3), (8, 2, 1)]:
        assert pass_at_k_of_task(c, n, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))
    with pytest.raises(ValueError, match="at least 3 samples"):
        pass_at_k_of_task(1, 2, 3)
    # one sample per task: Wilson's interval over the samples
    one = pass_at_k([(1, 1)] * 7 + [(0, 1)] * 3)
    assert (one.value, one.n, one.tasks) == (0.7, 10, 10)
    assert (one.low, one.high) == pytest.approx(wilson(7, 10))
    # several per task: every task passing every time is still not certainty over 3 tasks
    every = pass_at_k([(4, 4)] * 3)
    assert every.value == 1.0 and every.high == 1.0 and every.low == pytest.approx(wilson(3, 3)[0])
    # and the interval holds the estimate; pass@k >= pass@1
    mixed = pass_at_k([(1, 4), (3, 4), (0, 4), (4, 4)], 1)
    assert mixed.low < mixed.value < mixed.high and mixed.value == pytest.approx(0.5)
    assert pass_at_k([(1, 4), (3, 4), (0, 4), (4, 4)], 4).value == pytest.approx(0.75)
    assert pass_at_k([(1, 1)], 2).tasks == 0  # too few samples for pass@2: left out


def test_a_paired_difference_needs_more_than_one_task_to_be_significant() -> None:
    from learners.evaluation import paired_difference

    one = paired_difference({"a": (2, 2)}, {"a": (0, 2)})
    assert one.value == -1.0 and one.high > 0
    base = {f"t{i}": (1, 1) for i in range(40)}
    better = {f"t{i}": (1, 1) for i in range(40)}
    worse = {f"t{i}": (i % 4 == 0, 1) for i in range(40)}
    assert paired_difference(base, worse).high < 0  # a drop from 100% to 25% on 40 tasks shows
    same = paired_difference(base, better)
    assert same.value == 0.0 and same.low < 0 < same.high
