"""``/failures``: why episodes fail, per group and per error signature, under one judge version."""

from __future__ import annotations

from typing import Annotated

import pyarrow as pa
from fastapi import APIRouter, Query

from api import analysis
from api.analysis import (
    BreakdownKey,
    breakdown,
    breakdown_rows,
    choose_judge,
    clusters,
    crosstab,
    judge_versions,
    judged_by,
)
from api.cursor import Page, PageDep
from api.deps import (
    EpisodesVersion,
    FailuresVersion,
    JudgeName,
    JudgeVersion,
    Limit,
    MinSize,
    ReaderDep,
    RewardsVersion,
)
from api.errors import InvalidRequestError
from api.lake_reader import LakeReader, Snapshot, versions_of
from api.models import (
    BreakdownCellPublic,
    BreakdownGroupPublic,
    BreakdownPublic,
    ClusterPublic,
    ClustersPublic,
    FailureCasePublic,
    FailureCasesPublic,
    TaskCountPublic,
    VersionCountPublic,
)

router = APIRouter(prefix="/failures", tags=["failures"])


def _judged_failures(
    reader: LakeReader,
    judge: str | None,
    judge_version: str | None,
    version: int | None,
    rewards_version: int | None,
    page: Page | None = None,
) -> tuple[Snapshot, Snapshot, str | None, str | None, pa.Table]:
    """The failures and rewards snapshots, the (judge, version) asked for or defaulted, its failures."""
    if page is not None:  # a cursor's page reads the versions its first page read
        version, rewards_version = page.pin("failures", version), page.pin("rewards", rewards_version)
    failures = reader.snapshot("failures", version)
    rewards = reader.snapshot("rewards", rewards_version)
    known = reader.derived(rewards, "judge_versions", judge_versions)
    # A time-travelled failures table with the latest rewards: default to the
    # latest judge version that snapshot has failures of, not one it predates.
    name, jv = choose_judge(
        known,
        judge,
        judge_version,
        failures=failures.table,
        among_failures=version is not None and rewards_version is None,
    )
    rows = reader.derived(failures, ("judged", name, jv), lambda t: judged_by(t, name, jv))
    return failures, rewards, name, jv, rows


@router.get("/breakdown")
def failure_breakdown(
    reader: ReaderDep,
    by: Annotated[BreakdownKey, Query(description="Group by category, task, family or policy_version.")] = (
        "category"
    ),
    then: Annotated[
        BreakdownKey | None, Query(description="A second key: the counts per (by, then) pair too.")
    ] = None,
    category: Annotated[str | None, Query(description="Only failures of this category.")] = None,
    family: Annotated[str | None, Query(description="Only failures of this task family.")] = None,
    task_id: Annotated[str | None, Query(description="Only failures of this task.")] = None,
    policy_version: Annotated[str | None, Query(description="Only failures of this policy version.")] = None,
    judge: JudgeName = None,
    judge_version: JudgeVersion = None,
    version: FailuresVersion = None,
    rewards_version: RewardsVersion = None,
    episodes_version: EpisodesVersion = None,
) -> BreakdownPublic:
    """Failures of one judge version counted per group, with each group's share, most first.

    The judge defaults to the only one that scored episodes, its version to the
    latest seen (the version whose first reward is newest; with ``version`` set
    and ``rewards_version`` not, the latest among those the failures snapshot has).
    ``family`` comes from the ``episodes`` table (at ``episodes_version``). ``then`` adds the
    counts per pair of keys (category x family, say); the filters restrict every count, the
    shares are of the failures left.
    """
    if then == by:
        raise InvalidRequestError(f"then: give a key other than by ({by}), or leave it out")
    failures, rewards, name, jv, rows = _judged_failures(
        reader, judge, judge_version, version, rewards_version
    )
    snaps = [failures, rewards]
    filters = {"category": category, "family": family, "task": task_id, "policy_version": policy_version}
    episodes = None
    if "family" in (by, then) or family is not None:
        episodes = reader.snapshot("episodes", episodes_version)
        snaps.append(episodes)
    key = (name, jv, None if episodes is None else episodes.version, tuple(sorted(filters.items(), key=str)))
    selected = reader.derived(
        failures,
        ("breakdown_rows", *key),
        lambda _: breakdown_rows(rows, None if episodes is None else episodes.table, filters),
    )
    groups = reader.derived(failures, ("breakdown", by, *key), lambda _: breakdown(selected, by))
    cells = (
        reader.derived(failures, ("crosstab", by, then, *key), lambda _: crosstab(selected, by, then))
        if then is not None
        else []
    )
    total = selected.num_rows
    return BreakdownPublic(
        versions=versions_of(*snaps),
        judge=name,
        judge_version=jv,
        by=by,
        then=then,
        filters={k: v for k, v in filters.items() if v is not None},
        total=total,
        groups=[BreakdownGroupPublic(key=k, count=n, share=n / total) for k, n in groups],
        cells=[BreakdownCellPublic(key=k, then=t, count=n, share=n / total) for k, t, n in cells],
    )


@router.get("/clusters")
def failure_clusters(
    reader: ReaderDep,
    page: PageDep,
    judge: JudgeName = None,
    judge_version: JudgeVersion = None,
    min_size: MinSize = 1,
    examples: Annotated[int, Query(ge=1, le=50, description="Example episode ids per cluster.")] = 5,
    limit: Limit = 100,
    version: FailuresVersion = None,
    rewards_version: RewardsVersion = None,
) -> ClustersPublic:
    """Failures of one judge version grouped by error signature, biggest cluster first.

    Each cluster has its count and share, its category, the tasks involved (with
    their counts) and example episode ids (the oldest). The judge and version
    default as in ``/failures/breakdown``.
    """
    failures, rewards, name, jv, rows = _judged_failures(
        reader, judge, judge_version, version, rewards_version, page
    )
    found = reader.derived(
        failures,
        ("clusters", name, jv, min_size, examples),
        lambda _: clusters(rows, min_size=min_size, examples=examples),
    )
    total = rows.num_rows
    versions = versions_of(failures, rewards)
    return ClustersPublic(
        versions=versions,
        next_cursor=page.next(versions, limit, len(found)),
        judge=name,
        judge_version=jv,
        total_failures=total,
        total_clusters=len(found),
        clusters=[
            ClusterPublic(
                signature=c.signature,
                category=c.category,
                count=c.count,
                share=c.count / total,
                tasks=[TaskCountPublic(task_id=t, count=n) for t, n in c.tasks],
                example_episode_ids=c.example_episode_ids,
                example_message=c.example_message,
            )
            for c in found[page.offset : page.offset + limit]
        ],
    )


@router.get("/cases")
def failure_cases(
    reader: ReaderDep,
    page: PageDep,
    judge: JudgeName = None,
    judge_version: JudgeVersion = None,
    min_size: MinSize = 1,
    examples: Annotated[int, Query(ge=1, le=50, description="Example episode ids per cluster.")] = 5,
    limit: Limit = 100,
    version: FailuresVersion = None,
    rewards_version: RewardsVersion = None,
    episodes_version: EpisodesVersion = None,
) -> FailureCasesPublic:
    """One judge version's failures by (task family, category, signature): the failure-case library.

    What ``trajlake failures cases`` prints: each cluster's stable id, count and share, tasks, the
    trend over policy versions (in the order they first acted), its newest episodes, and the
    curated cases saved from it (``failure_cases``). The judge and version default as in
    ``/failures/breakdown``.
    """
    failures, rewards, name, jv, rows = _judged_failures(
        reader, judge, judge_version, version, rewards_version, page
    )
    episodes = reader.snapshot("episodes", page.pin("episodes", episodes_version))
    saved = reader.snapshot("failure_cases", page.pin("failure_cases", None))
    found = reader.derived(
        failures,
        ("cases", name, jv, min_size, examples, episodes.version),
        lambda _: analysis.failure_clusters(rows, episodes.table, min_count=min_size, examples=examples),
    )
    curated = analysis.cases_by_cluster(saved.table)
    total = rows.num_rows
    versions = versions_of(failures, rewards, episodes, saved)
    return FailureCasesPublic(
        versions=versions,
        next_cursor=page.next(versions, limit, len(found)),
        judge=name,
        judge_version=jv,
        total_failures=total,
        total_clusters=len(found),
        clusters=[
            FailureCasePublic(
                cluster_id=c.cluster_id,
                family=c.family,
                category=c.category,
                signature=c.signature,
                count=c.count,
                share=c.count / total,
                tasks=[TaskCountPublic(task_id=t, count=n) for t, n in c.tasks],
                trend=[VersionCountPublic(policy_version=v, count=n) for v, n in c.trend],
                example_episode_ids=c.examples,
                example_message=c.message,
                first_seen=c.first_seen,
                last_seen=c.last_seen,
                cases=curated.get(c.cluster_id, []),
            )
            for c in found[page.offset : page.offset + limit]
        ],
    )
