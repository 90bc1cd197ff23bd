"""The numbers a rollout run reports: statuses, model calls and token-history breaks against the threshold."""

from __future__ import annotations

import pytest

from rollouts import HISTORY_BREAK_WARN, EpisodeOutcome, summarize


def _outcome(status: str, calls: int, breaks: int) -> EpisodeOutcome:
    return EpisodeOutcome(episode_id="e", task_id="t", group_id=None, status=status, verdict=None, score=None,
                          steps=calls, duration_s=0.0, policy_version="0", model_calls=calls,
                          history_breaks=breaks)  # fmt: skip


@pytest.mark.parametrize(
    ("breaks", "warns"), [(0, False), (1, False), (2, True)]
)  # of 20 calls: 0%, exactly the 5% threshold, 10%
def test_the_history_break_warning_is_set_only_above_the_threshold(breaks: int, warns: bool) -> None:
    s = summarize(
        [_outcome("success", 10, breaks), _outcome("failure", 10, 0), _outcome("infra_error", 0, 0)]
    )
    assert (s.model_calls, s.history_breaks, s.history_break_share) == (20, breaks, breaks / 20)
    assert s.history_break_warning is warns and s.history_break_threshold == HISTORY_BREAK_WARN == 0.05
    assert s.statuses == {"failure": 1, "infra_error": 1, "success": 1} and s.episodes == 3


def test_a_rollout_without_model_calls_has_no_share_to_warn_about() -> None:
    s = summarize([_outcome("success", 0, 0)])
    assert (s.model_calls, s.history_break_share, s.history_break_warning) == (0, 0.0, False)
