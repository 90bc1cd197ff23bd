"""Beam pipelines that fold the Kafka log into Delta tables, exactly once; replay; lake diff.

Public API: :class:`PipelineConfig`, :func:`run_once`, :func:`run_follow`,
:func:`replay`, :class:`Lake`, :func:`diff_lakes`, the Beam stages, and the
pure projection (:func:`fold_episode`) and failure attribution.
"""

from pipelines.beam_stages import (
    AssembleEpisodes,
    DedupEvents,
    LoadTouchedEpisodes,
    ParseAndValidate,
    ReadKafkaRanges,
    WriteDelta,
)
from pipelines.delta_sink import PIPELINE_TABLES, Lake, OffsetRange, app_id
from pipelines.errors import (
    LakeDamagedError,
    LakeError,
    PipelineError,
    TableMissingError,
    VersionNotFoundError,
)
from pipelines.failures import CATEGORIES, attribute, failure_rows, normalise_error
from pipelines.lake_diff import TableDiff, diff_lakes
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
from pipelines.projection import EpisodeState, episode_row, fold_episode, reward_rows, step_rows

__all__ = [
    "CATEGORIES",
    "PIPELINE_TABLES",
    "AssembleEpisodes",
    "BatchResult",
    "DedupEvents",
    "EpisodeState",
    "Lake",
    "LakeDamagedError",
    "LakeError",
    "TableMissingError",
    "VersionNotFoundError",
    "LoadTouchedEpisodes",
    "OffsetRange",
    "ParseAndValidate",
    "PipelineConfig",
    "PipelineError",
    "ReadKafkaRanges",
    "TableDiff",
    "WriteDelta",
    "app_id",
    "attribute",
    "backlog",
    "diff_lakes",
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
