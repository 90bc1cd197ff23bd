"""The lake: every Delta table trajlake keeps, and the only code that reads or writes one.

Public API: :class:`Lake` (create, open, time-travel, read, commit exactly once
with the Kafka offsets as Delta ``txn`` actions), :func:`consistent_versions`
(the versions of several tables that hold the same offsets), :func:`sql_literal`,
the integrity check (:func:`check_lake`) and the row-set comparison of two
lakes (:func:`diff_lakes`). Which episodes a learner trains on is decided here
too, once, for the learners and for the API that explains their choices
(:mod:`lake.selection`: :func:`trainable`, :class:`Retracted`, :func:`group_advantages_np`).
Table names and schemas are :mod:`schemas.tables`.
Depends on ``schemas`` only; ``pipelines``, ``api``, ``learners`` and the CLI
read and write tables through it (Spark maintenance aside).
"""

from lake.check import REBUILD, TableCheck, check_lake, check_table, damage_summary, refuse_damaged
from lake.diff import TableDiff, diff_lakes
from lake.errors import LakeDamagedError, LakeError, TableMissingError, VersionNotFoundError
from lake.selection import Picked, Retracted, group_advantages_np, retractions_hitting, trainable
from lake.store import (
    CONFLICT_PREFIX,
    PIPELINE_TABLES,
    Lake,
    OffsetRange,
    TableHandle,
    WriteMode,
    app_id,
    consistent_versions,
    sql_literal,
)

__all__ = [
    "CONFLICT_PREFIX",
    "PIPELINE_TABLES",
    "REBUILD",
    "Lake",
    "LakeDamagedError",
    "LakeError",
    "OffsetRange",
    "Picked",
    "Retracted",
    "TableCheck",
    "TableDiff",
    "TableHandle",
    "TableMissingError",
    "VersionNotFoundError",
    "WriteMode",
    "app_id",
    "check_lake",
    "check_table",
    "consistent_versions",
    "damage_summary",
    "diff_lakes",
    "group_advantages_np",
    "refuse_damaged",
    "retractions_hitting",
    "sql_literal",
    "trainable",
]
