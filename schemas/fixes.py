"""The fixes lower packages attach to their errors, as data (:class:`schemas.errors.Fix`).

Each names a ``trajlake`` command by its words, never as text in a message, so the
commands are checked to exist in one place (``tests/trajlake/test_cli_names.py``) and a
front end other than the CLI can render them its own way.
"""

from __future__ import annotations

from schemas.errors import Fix

START_BROKER = Fix(
    "start the embedded one with {command} (or point TRAJLAKE_KAFKA_BOOTSTRAP at a running cluster)", ("up",)
)
CREATE_TOPICS = Fix(
    "{command} creates the missing topics on a running broker (`--replication 3` on a cluster)",
    ("topics", "--replication", "1"),
)
STOP_BROKER_FIRST = Fix("run {command} first", ("down",))
BROKER_STATUS = Fix("is the broker reachable ({command})?", ("status",))
SPOOL_DRAIN = Fix("{command} sends the spools of workers that are gone", ("spool", "drain"))
TOPIC_MISSING = Fix("{command} creates trajlake's topics (or name another with --topic)", ("up",))
REPLAY_INTO = Fix("rebuild the lake from the log with {command}", ("replay", "--into", "NEW_DIR"))
REPLAY_THIS_LOG = Fix("{command} builds a lake of this log", ("replay", "--into", "NEW_DIR"))
REPLAY_FROM_TIME = Fix(
    "keep the log's retention longer than the pipeline's lag, and {command} builds a lake from what the log "
    "still holds",
    ("replay", "--from-time", "T", "--into", "NEW_DIR"),
)
FOLD_LOG = Fix("{command} folds the log into it", ("pipeline", "run", "--once"))
NEXT_FOLD = Fix("the next {command} commits it again", ("pipeline", "run", "--once"))
LAKE_CHECK = Fix("{command} shows which table is behind", ("lake", "check"))
BUILD_IMAGE = Fix("build it with {command}", ("sandbox", "build-image"))
IMPORT_IMAGE = Fix("import it into the engine with {command}", ("sandbox", "build-image", "--docker"))
REBUILD_IMAGE = Fix("rebuild it with {command}", ("sandbox", "build-image", "--force"))
NEWEST_CHECKPOINT = Fix("{command} shows the newest", ("lineage", "latest"))
DRIFT = Fix("{command} shows where its re-execution diverges", ("drift",))
SEPARATE_HOME = Fix("use another TRAJLAKE_HOME for the cluster (and {command} into a lake of it)",
                    ("replay", "--into", "NEW_DIR"))  # fmt: skip
API_REVIEWERS = Fix("serve it with TRAJLAKE_API_REVIEWERS naming a YAML file of reviewer: token ({command})",
                    ("api", "serve"))  # fmt: skip


def cluster_up(brokers: int) -> Fix:
    """Start the cluster a home holds, with its number of brokers."""
    return Fix("start it with {command}, or move its directory away to start another",
               ("up", "--brokers", str(brokers)))  # fmt: skip


def every() -> list[Fix]:
    """Every fix of this module (the parametrised ones with an example), for the check that names exist."""
    return [v for v in globals().values() if isinstance(v, Fix)] + [cluster_up(3)]
