"""What a batch of rollouts did, in numbers a person or a monitor reads (the CLI prints it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rollouts.worker import EpisodeOutcome

HISTORY_BREAK_WARN = 0.05
"""Above this share of model calls breaking their token history, a rollout warns (a chat template that
re-renders earlier turns differently breaks nearly every turn; an occasional break is a truncation)."""


@dataclass(frozen=True)
class RolloutSummary:
    """Counts over the outcomes of one rollout run."""

    episodes: int
    """Episodes that ran (whatever their status)."""
    statuses: dict[str, int] = field(default_factory=dict)
    """Episodes by status (``success``, ``failure``, ``truncated``, ``infra_error``, ``aborted``)."""
    model_calls: int = 0
    """Model calls over all episodes."""
    history_breaks: int = 0
    """Model calls whose prompt did not continue their conversation's token history (each starts a new
    training sequence with the whole history as its prompt)."""
    history_break_threshold: float = HISTORY_BREAK_WARN
    """The share above which the run warns."""

    @property
    def history_break_share(self) -> float:
        """``history_breaks / model_calls`` (0 without model calls)."""
        return self.history_breaks / self.model_calls if self.model_calls else 0.0

    @property
    def history_break_warning(self) -> bool:
        """Whether the share crossed the threshold."""
        return self.history_break_share > self.history_break_threshold

    def as_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-ready values (the share and the warning too)."""
        out = asdict(self)
        threshold = out.pop("history_break_threshold")
        return {**out, "history_break_share": self.history_break_share, "history_break_threshold": threshold,
                "history_break_warning": self.history_break_warning}  # fmt: skip


def summarize(outcomes: Sequence[EpisodeOutcome], *, threshold: float = HISTORY_BREAK_WARN) -> RolloutSummary:
    """The summary of ``outcomes``; the history-break warning is set when the share exceeds ``threshold``."""
    return RolloutSummary(
        episodes=len(outcomes),
        statuses=dict(sorted(Counter(o.status for o in outcomes).items())),
        model_calls=sum(o.model_calls for o in outcomes),
        history_breaks=sum(o.history_breaks for o in outcomes),
        history_break_threshold=threshold,
    )
