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
