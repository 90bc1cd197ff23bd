"""Is a lake intact? Every table's log, every file it names, and the tables' agreement on the log.

Checked per table, without trusting the Delta reader to notice: the log's
commit files are numbered 0..N with no gap (after the last checkpoint) and
each one is JSON; ``_last_checkpoint`` points at a version that exists; the
table opens; every data file its current version names is there. Across the
pipeline tables: every table committed the same Kafka offsets (its ``txn``
versions), since one micro-batch commits all of them, so a table that is behind
the others lost a commit (or a pipeline is writing right now).

A damaged lake is never repaired in place: the log is the source of truth, and
``trajlake replay --into NEW_DIR`` rebuilds every table from it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from lake.store import PIPELINE_TABLES, Lake
from schemas import fixes
from schemas.tables import TABLES

REBUILD = fixes.REPLAY_INTO
"""How a damaged lake is fixed (a :class:`~schemas.errors.Fix`)."""
_COMMIT = re.compile(r"^(\d{20})\.json$")


@dataclass
class TableCheck:
    """What was found about one table."""

    table: str
    exists: bool = False
    version: int | None = None
    """The latest version its log holds."""
    files: int = 0
    """Data files its current version names."""
    problems: list[str] = field(default_factory=list)
    """Each damage found, as a sentence (empty: intact)."""
    warnings: list[str] = field(default_factory=list)
    """What is odd but not damage: a table behind the others (a crash mid-batch, or a lost commit;
    the next pipeline run commits the batch again)."""
    txns: dict[str, int] = field(default_factory=dict)
    """The Kafka offsets (``txn`` versions) it committed, by app id."""

    @property
    def ok(self) -> bool:
        """No damage found."""
        return not self.problems


def _log_problems(log_dir: Path) -> tuple[int | None, list[str]]:
    """The latest version in a ``_delta_log`` and what is wrong with the log itself."""
    problems: list[str] = []
    versions = sorted(int(m.group(1)) for p in log_dir.iterdir() if (m := _COMMIT.match(p.name)))
    if not versions:
        return None, [f"{log_dir} holds no commit"]
    start = 0
    last_cp = log_dir / "_last_checkpoint"
    if last_cp.exists():
        try:
            cp = int(json.loads(last_cp.read_text())["version"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"_last_checkpoint is unreadable ({exc})")
            cp = None
        if cp is not None:
            if cp > versions[-1]:
                problems.append(
                    f"_last_checkpoint names version {cp}, but the newest commit is {versions[-1]}"
                )
            start = cp
    expected = list(range(max(start, versions[0]), versions[-1] + 1))
    missing = sorted(set(expected) - set(versions))
    if missing:
        problems.append(f"commit(s) {', '.join(map(str, missing[:5]))} missing from the log")
    for v in versions[-3:]:  # the newest commits are the ones a crash or a bad copy damages
        path = log_dir / f"{v:020d}.json"
        try:
            actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        except (OSError, ValueError) as exc:
            problems.append(f"commit {v} ({path.name}) does not parse: {str(exc)[:120]}")
            continue
        if not actions:
            problems.append(f"commit {v} ({path.name}) is empty (every commit holds at least one action)")
    return versions[-1], problems


def _file_problems(dt: object, *, footers: bool) -> list[str]:
    """Data files of the current version that are gone, resized, or (``footers``) not Parquet.

    Sizes are compared with what the log records; with ``footers`` each file's Parquet footer
    is read too.
    """
    import pyarrow.parquet as pq

    try:
        actions = dt.get_add_actions(flatten=True)  # type: ignore[attr-defined]
        uris = dt.file_uris()  # type: ignore[attr-defined]
        sizes = actions.column("size_bytes").to_pylist()
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several types for a damaged log
        return [f"its file list does not load: {str(exc).splitlines()[0][:200]}"]
    gone, resized, unreadable = [], [], []
    for uri, size in zip(uris, sizes, strict=False):
        if "://" in uri:
            continue  # object stores: only what delta-rs itself checks
        path = Path(uri)
        try:
            have = path.stat().st_size
        except FileNotFoundError:
            gone.append(path.name)
            continue
        if size is not None and have != size:
            resized.append(f"{path.name} ({have:,} bytes, the log says {size:,})")
            continue
        if footers:
            try:
                pq.read_metadata(path)
            except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
                unreadable.append(f"{path.name} ({str(exc).splitlines()[0][:80]})")
    out = []
    if gone:
        out.append(f"{len(gone)} data file(s) its log names are gone, e.g. {gone[0]}")
    if resized:
        out.append(f"{len(resized)} data file(s) are not the size its log records, e.g. {resized[0]}")
    if unreadable:
        out.append(f"{len(unreadable)} data file(s) are not readable Parquet, e.g. {unreadable[0]}")
    return out


def check_table(lake: Lake, name: str, *, footers: bool = True) -> TableCheck:
    """Check one table of a local lake (see the module docstring).

    ``footers``: also read every data file's Parquet footer (one small read per file).
    """
    from deltalake import DeltaTable

    out = TableCheck(name)
    root = Path(lake.uri(name))
    log_dir = root / "_delta_log"
    if "://" in lake.root:
        log_dir = Path("/nonexistent")  # object stores: only what delta-rs itself checks
    if log_dir.is_dir():
        out.exists = True
        out.version, out.problems = _log_problems(log_dir)
    try:
        dt = DeltaTable(lake.uri(name), storage_options=lake.storage_options)
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several types for a damaged log
        if out.exists or "://" in lake.root:
            out.problems.append(f"the table does not open: {str(exc).splitlines()[0][:200]}")
        return out
    out.exists = True
    out.version = dt.version()
    try:
        uris = dt.file_uris()
    except Exception as exc:  # noqa: BLE001
        out.problems.append(f"its file list does not load: {str(exc).splitlines()[0][:200]}")
        return out
    out.files = len(uris)
    out.problems += _file_problems(dt, footers=footers)
    for app in _recent_app_ids(log_dir):
        try:
            v = dt.transaction_version(app)
        except Exception:  # noqa: BLE001 - agreement is then unchecked for this app
            continue
        if v is not None:
            out.txns[app] = int(v)
    return out


def _recent_app_ids(log_dir: Path, commits: int = 20) -> set[str]:
    """The ``txn`` app ids the newest commits carry (every micro-batch commits one per partition)."""
    apps: set[str] = set()
    if not log_dir.is_dir():
        return apps
    paths = sorted(p for p in log_dir.iterdir() if _COMMIT.match(p.name))[-commits:]
    for path in paths:
        try:
            for line in path.read_text().splitlines():
                if '"txn"' in line:
                    apps.add(str(json.loads(line)["txn"]["appId"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return apps


def recent_app_ids(lake: Lake, name: str, commits: int = 20) -> set[str]:
    """The ``txn`` app ids of table ``name``'s newest commits (empty for a lake on an object store)."""
    if "://" in lake.root:
        return set()
    return _recent_app_ids(Path(lake.uri(name)) / "_delta_log", commits)


def check_lake(lake: Lake, tables: tuple[str, ...] = tuple(TABLES)) -> list[TableCheck]:
    """Check every table, then the pipeline tables' agreement on the offsets they committed."""
    checks = [check_table(lake, t) for t in tables]
    pipeline = [c for c in checks if c.table in PIPELINE_TABLES and c.exists and c.ok and c.txns]
    for app in sorted({a for c in pipeline for a in c.txns}):
        newest = max(c.txns.get(app, -1) for c in pipeline)
        for c in pipeline:
            have = c.txns.get(app, -1)
            if have < newest:
                c.warnings.append(
                    f"behind the other tables on {app} (offset {have} < {newest}): a pipeline is writing "
                    f"now, stopped mid-batch, or a commit was lost; {fixes.NEXT_FOLD.render()}"
                )
    return checks


def refuse_damaged(lake: Lake, tables: tuple[str, ...] = PIPELINE_TABLES) -> None:
    """Raise before writing on top of a damaged table (its log does not read, or it has a gap).

    Cheap: the log, and the size of every data file the current version names (no data file is
    opened; a file damaged without changing its size is found when it is read, and by
    ``trajlake lake check``).

    Raises:
        LakeDamagedError: a table's log is damaged.
    """
    from lake.errors import LakeDamagedError

    for name in tables:
        log_dir = Path(lake.uri(name)) / "_delta_log"
        if "://" in lake.root or not log_dir.is_dir():
            continue
        version, problems = _log_problems(log_dir)
        if not problems:
            try:
                # (the run's held snapshot inside held_snapshots: the pipeline goes on reading it)
                problems = _file_problems(lake.table(name), footers=False)
            except LakeDamagedError:
                raise
            except Exception as exc:  # noqa: BLE001 - delta-rs raises several types for a damaged log
                problems = [f"the table does not open: {str(exc).splitlines()[0][:200]}"]
        if problems:
            raise LakeDamagedError(
                f"table {name} of the lake at {lake.root} is damaged at version {version}: {problems[0]}",
                fix=REBUILD,
            )


def damage_summary(checks: list[TableCheck]) -> str | None:
    """One sentence naming the damaged tables and the fix, or ``None`` when the lake is intact."""
    bad = [c for c in checks if not c.ok]
    if not bad:
        return None
    parts = [f"{c.table} (version {c.version}): {c.problems[0]}" for c in bad]
    return f"the lake is damaged: {'; '.join(parts)}; {REBUILD.render()}"
