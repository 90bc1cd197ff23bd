"""The fold: events into the rows of every derived table, a pure function with no Beam and no I/O.

Between :mod:`schemas` (what an event is) and :mod:`lake` (where rows are kept). The log
pipeline, replay and re-judge all fold through it, so their tables agree by construction:

- :mod:`fold.views`: an ``events`` row as plain values, its payload decoded once;
- :mod:`fold.projection`: an episode's events -> :class:`EpisodeState` -> ``episodes``,
  ``steps`` and ``rewards`` rows;
- :mod:`fold.failures`: failure attribution (``failures`` rows);
- :mod:`fold.samples`: training sequences (``samples`` rows);
- :mod:`fold.rows`: rows <-> events, and :func:`fold_events`, the fold of many streams' rows
  (one Arrow table in, one Arrow table per derived table out).
"""

from fold.failures import CATEGORIES, attribute, failure_rows, normalise_error
from fold.projection import EpisodeState, RewardRecord, episode_row, fold_episode, reward_rows, step_rows
from fold.rows import (
    DERIVED_TABLES,
    EPISODE_TABLES,
    FOLD_ERROR,
    Folded,
    assemble,
    dead_letter,
    event_row,
    fold_events,
    row_to_event,
)
from fold.samples import sample_rows, sampling_transform
from fold.views import EventView, as_view, view_of_event, view_of_row

__all__ = [
    "CATEGORIES",
    "DERIVED_TABLES",
    "EPISODE_TABLES",
    "FOLD_ERROR",
    "EpisodeState",
    "EventView",
    "Folded",
    "RewardRecord",
    "as_view",
    "assemble",
    "attribute",
    "dead_letter",
    "episode_row",
    "event_row",
    "failure_rows",
    "fold_episode",
    "fold_events",
    "normalise_error",
    "reward_rows",
    "row_to_event",
    "sample_rows",
    "sampling_transform",
    "step_rows",
    "view_of_event",
    "view_of_row",
]
