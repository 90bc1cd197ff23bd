"""``/judges``: judges and their versions, and how a re-judge changed verdicts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from api.analysis import choose_judge, judge_versions, verdict_diff
from api.cursor import PageDep
from api.deps import Limit, ReaderDep, RewardsVersion
from api.errors import InvalidRequestError, NotFoundError
from api.lake_reader import versions_of
from api.models import (
    JudgeDiffPublic,
    JudgePublic,
    JudgesPublic,
    JudgeVersionPublic,
    VerdictFlipPublic,
)

router = APIRouter(prefix="/judges", tags=["judges"])


@router.get("")
def list_judges(reader: ReaderDep, version: RewardsVersion = None) -> JudgesPublic:
    """Every judge that scored episodes, with its versions oldest first (by their first reward)."""
    rewards = reader.snapshot("rewards", version)
    known = reader.derived(rewards, "judge_versions", judge_versions)
    return JudgesPublic(
        versions=versions_of(rewards),
        judges=[
            JudgePublic(
                name=name,
                versions=[
                    JudgeVersionPublic(
                        version=v.version,
                        episodes=v.episodes,
                        first_seen=v.first_seen,
                        last_seen=v.last_seen,
                        verdicts=v.verdicts,
                    )
                    for v in versions
                ],
            )
            for name, versions in known.items()
        ],
    )


@router.get("/{name}/diff", responses={404: {"description": "No such judge or judge version."}})
def judge_diff(
    reader: ReaderDep,
    page: PageDep,
    name: Annotated[str, Path(description="The judge.")],
    from_version: Annotated[
        str | None, Query(description="The old version (default: the one seen before `to_version`).")
    ] = None,
    to_version: Annotated[
        str | None, Query(description="The new version (default: the latest seen).")
    ] = None,
    limit: Limit = 100,
    version: RewardsVersion = None,
) -> JudgeDiffPublic:
    """Two versions of a judge on the episodes both scored: the verdict-flip matrix and the flipped episodes.

    For checking a re-judge: ``matrix[from][to]`` counts episodes per pair of
    verdicts, and ``flips`` lists the episodes whose verdict changed, by id.
    """
    rewards = reader.snapshot("rewards", page.pin("rewards", version))
    known = reader.derived(rewards, "judge_versions", judge_versions)
    if name not in known:
        judges = ", ".join(known) or "none yet"
        raise NotFoundError(f"no judge named {name!r} scored episodes; judges: {judges}")
    _, to_v = choose_judge(known, name, to_version)
    ordered = [v.version for v in known[name]]
    if from_version is None:
        before = ordered[: ordered.index(to_v or "")]
        if not before:
            raise InvalidRequestError(
                f"judge {name!r} has no version seen before {to_v!r} (versions: {', '.join(ordered)}): "
                "give from_version"
            )
        from_version = before[-1]
    _, from_v = choose_judge(known, name, from_version)
    assert from_v is not None and to_v is not None  # choose_judge raised otherwise
    diff = reader.derived(
        rewards, ("diff", name, from_v, to_v), lambda t: verdict_diff(t, name, from_v, to_v)
    )
    versions = versions_of(rewards)
    return JudgeDiffPublic(
        versions=versions,
        next_cursor=page.next(versions, limit, diff.flips.num_rows),
        judge=name,
        from_version=from_v,
        to_version=to_v,
        both=diff.both,
        only_from=diff.only_from,
        only_to=diff.only_to,
        flipped=diff.flips.num_rows,
        matrix=diff.matrix,
        mean_score_from=diff.mean_score_from,
        mean_score_to=diff.mean_score_to,
        flips=[VerdictFlipPublic(**r) for r in diff.flips.slice(page.offset, limit).to_pylist()],
    )
