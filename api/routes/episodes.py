"""``/episodes``: find episodes, and open one with its steps, rewards and failures."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pyarrow as pa
from fastapi import APIRouter, Path, Query

from api.analysis import (
    choose_judge,
    episodes_with_verdict,
    filter_rows,
    judge_versions,
    judged_by,
    newest_first,
    parse_json,
    truncate,
    truncate_json,
)
from api.cursor import PageDep
from api.deps import (
    EpisodesVersion,
    FailuresVersion,
    JudgeName,
    JudgeVersion,
    Limit,
    ReaderDep,
    RewardsVersion,
    StepsVersion,
)
from api.errors import NotFoundError
from api.lake_reader import versions_of
from api.models import (
    EpisodeDetailPublic,
    EpisodePublic,
    EpisodesPublic,
    FailurePublic,
    RewardPublic,
    StepPublic,
)

router = APIRouter(prefix="/episodes", tags=["episodes"])

Status = Literal["success", "failure", "truncated", "infra_error", "aborted"]
Completeness = Literal["complete", "open", "gap"]
Verdict = Literal["pass", "fail", "error"]


@router.get("")
def list_episodes(
    reader: ReaderDep,
    page: PageDep,
    task_id: Annotated[str | None, Query(description="Only this task.")] = None,
    family: Annotated[str | None, Query(description="Only this task family.")] = None,
    status: Annotated[Status | None, Query(description="Only episodes that ended so.")] = None,
    policy_version: Annotated[str | None, Query(description="Only this policy version.")] = None,
    completeness: Annotated[Completeness | None, Query(description="Only complete, open or gap.")] = None,
    judge: JudgeName = None,
    judge_version: JudgeVersion = None,
    verdict: Annotated[
        Verdict | None, Query(description="Only episodes the judge version gave this verdict.")
    ] = None,
    limit: Limit = 50,
    version: EpisodesVersion = None,
    rewards_version: RewardsVersion = None,
) -> EpisodesPublic:
    """Episodes matching every filter given, newest first, one page at a time.

    ``judge``, ``judge_version`` or ``verdict`` restrict the list to the episodes
    that judge version scored (with that verdict); the judge and version default
    as in ``/failures/breakdown``.
    """
    episodes = reader.snapshot("episodes", page.pin("episodes", version))
    snaps = [episodes]
    ids: pa.Array | None = None
    chosen: tuple[str | None, str | None] = (None, None)
    if judge is not None or judge_version is not None or verdict is not None:
        rewards = reader.snapshot("rewards", page.pin("rewards", rewards_version))
        snaps.append(rewards)
        known = reader.derived(rewards, "judge_versions", judge_versions)
        chosen = choose_judge(known, judge, judge_version)
        name, jv = chosen
        if name is None or jv is None:
            ids = pa.array([], pa.string())
        elif verdict is None:
            ids = judged_by(rewards.table, name, jv)["episode_id"].combine_chunks()
        else:
            ids = episodes_with_verdict(rewards.table, name, jv, verdict)
    ordered = reader.derived(episodes, "newest_first", newest_first)
    matching = filter_rows(
        ordered,
        {
            "task_id": task_id,
            "task_family": family,
            "status": status,
            "policy_version": policy_version,
            "completeness": completeness,
        },
        ids,
    )
    rows = matching.slice(page.offset, limit).to_pylist()
    versions = versions_of(*snaps)
    return EpisodesPublic(
        versions=versions,
        total=matching.num_rows,
        limit=limit,
        offset=page.offset,
        next_cursor=page.next(versions, limit, matching.num_rows),
        judge=chosen[0],
        judge_version=chosen[1],
        items=[EpisodePublic(**row) for row in rows],
    )


def _step(row: dict[str, Any], max_text: int, include_payload: bool) -> StepPublic:
    text, cut = truncate(row["text"], max_text)
    payload, payload_cut = (
        truncate_json(parse_json(row["payload"]), max_text) if include_payload else (None, False)
    )
    return StepPublic(
        **{k: v for k, v in row.items() if k not in ("text", "payload")},
        text=text,
        text_length=None if row["text"] is None else len(row["text"]),
        text_truncated=cut,
        payload=payload,
        payload_truncated=payload_cut,
    )


def _reward(row: dict[str, Any], max_text: int) -> RewardPublic:
    evidence, cut = truncate_json(parse_json(row["evidence"]), max_text)
    return RewardPublic(
        **{k: v for k, v in row.items() if k not in ("components", "evidence")},
        components=parse_json(row["components"]),
        evidence=evidence,
        evidence_truncated=cut,
    )


@router.get("/{episode_id}", responses={404: {"description": "No such episode (at that version)."}})
def get_episode(
    reader: ReaderDep,
    episode_id: Annotated[str, Path(description="The episode.")],
    max_text: Annotated[
        int, Query(ge=0, le=1_000_000, description="Characters kept of each step text and JSON string.")
    ] = 2000,
    max_steps: Annotated[int, Query(ge=0, le=100_000, description="Steps returned (the first ones).")] = 1000,
    include_payload: Annotated[bool, Query(description="Return each step's payload too.")] = False,
    version: EpisodesVersion = None,
    steps_version: StepsVersion = None,
    rewards_version: RewardsVersion = None,
    failures_version: FailuresVersion = None,
) -> EpisodeDetailPublic:
    """One episode: its row, its steps in ``seq`` order, its rewards (every judge version), its failures."""
    episodes = reader.snapshot("episodes", version)
    rows = filter_rows(episodes.table, {"episode_id": episode_id}).to_pylist()
    if not rows:
        at = "" if version is None else f" at version {episodes.version}"
        raise NotFoundError(f"no episode {episode_id!r} in the episodes table{at}")
    steps = reader.rows_where("steps", "episode_id", episode_id, steps_version)
    # rewards and failures are small and cached whole for the failure routes;
    # steps (every event of every episode) are read for this episode only.
    rewards = reader.snapshot("rewards", rewards_version)
    failures = reader.snapshot("failures", failures_version)
    own_rewards = filter_rows(rewards.table, {"episode_id": episode_id})
    own_failures = filter_rows(failures.table, {"episode_id": episode_id})
    ordered_steps = steps.table.sort_by("seq")
    return EpisodeDetailPublic(
        versions=versions_of(episodes, steps, rewards, failures),
        episode=EpisodePublic(**rows[0]),
        steps=[_step(r, max_text, include_payload) for r in ordered_steps.slice(0, max_steps).to_pylist()],
        steps_total=ordered_steps.num_rows,
        rewards=[
            _reward(r, max_text)
            for r in own_rewards.sort_by([("judge_name", "ascending"), ("ts", "ascending")]).to_pylist()
        ],
        failures=[
            FailurePublic(**r)
            for r in own_failures.sort_by(
                [("judge_name", "ascending"), ("judge_version", "ascending")]
            ).to_pylist()
        ],
    )
