"""Beam pipelines that fold the Kafka log into Delta tables, exactly once; replay; lake diff.

Public API: :class:`PipelineConfig`, :func:`run_once`, :func:`run_follow`,
:func:`replay`, the Beam stages (the tables themselves: :mod:`lake`), and the
pure fold (:mod:`fold`: :func:`fold_episode`, failure attribution), re-exported here.
"""

from fold import (
    CATEGORIES,
    EpisodeState,
    attribute,
    episode_row,
    failure_rows,
    fold_episode,
    normalise_error,
    reward_rows,
    step_rows,
)
from pipelines.beam_stages import (
    AssembleEpisodes,
    DedupEvents,
    LoadTouchedEpisodes,
    ParseAndValidate,
    ReadKafkaRanges,
    WriteDelta,
)
from pipelines.errors import PipelineError
from pipelines.log_pipeline import (
    BatchResult,
    PipelineConfig,
    backlog,
    plan_batch,
    replay,
    run_batch,
    run_follow,
    run_once,
)

__all__ = [
    "CATEGORIES",
    "AssembleEpisodes",
    "BatchResult",
    "DedupEvents",
    "EpisodeState",
    "LoadTouchedEpisodes",
    "ParseAndValidate",
    "PipelineConfig",
    "PipelineError",
    "ReadKafkaRanges",
    "WriteDelta",
    "attribute",
    "backlog",
    "episode_row",
    "failure_rows",
    "fold_episode",
    "normalise_error",
    "plan_batch",
    "replay",
    "reward_rows",
    "run_batch",
    "run_follow",
    "run_once",
    "step_rows",
]
