"""``/review``: the review queue, and reviewers' verdicts (written to the log, folded into ``reviews``)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request

from api.cursor import PageDep
from api.deps import Limit, ReaderDep, ReviewerDep
from api.errors import LogUnavailableError, NotFoundError
from api.lake_reader import versions_of
from api.models import ReviewAcceptedPublic, ReviewIn, ReviewItemPublic, ReviewPublic, ReviewQueuePublic
from api.review import UnknownEpisodeError, queue_items, review_row

router = APIRouter(prefix="/review", tags=["review"])


@router.get("/queue")
def review_queue(
    reader: ReaderDep,
    page: PageDep,
    status: Annotated[
        Literal["open", "reviewed", "all"], Query(description="open: no verdict yet.")
    ] = "open",
    rule: Annotated[list[str] | None, Query(description="Only items of these rules.")] = None,
    limit: Limit = 50,
) -> ReviewQueuePublic:
    """The episodes queued for review (``trajlake review fill``), newest first, each with its reason."""
    queue = reader.snapshot("review_queue", page.pin("review_queue", None))
    reviews = reader.snapshot("reviews", page.pin("reviews", None))
    items = queue_items(queue.table, reviews.table, status=status, rules=rule)
    versions = versions_of(queue, reviews)
    return ReviewQueuePublic(
        versions=versions,
        status=status,
        total=len(items),
        limit=limit,
        offset=page.offset,
        next_cursor=page.next(versions, limit, len(items)),
        items=[
            ReviewItemPublic(**{**it, "reviews": [ReviewPublic(**r) for r in it["reviews"]]})
            for it in items[page.offset : page.offset + limit]
        ],  # fmt: skip
    )


@router.post("/{episode_id}", status_code=202)
def give_verdict(
    request: Request,
    reader: ReaderDep,
    reviewer: ReviewerDep,
    body: ReviewIn,
    episode_id: Annotated[str, Path(description="The episode reviewed.")],
) -> ReviewAcceptedPublic:
    """Record the token's reviewer's verdict on an episode in the log (202: folded on the next batch)."""
    from schemas.control import REVIEW, control_event
    from schemas.errors import TrajlakeError

    publish, topic = request.app.state.publish, request.app.state.review_topic
    if publish is None:
        raise LogUnavailableError("this service has no log to record verdicts in (TRAJLAKE_KAFKA_BOOTSTRAP)")
    try:
        row = review_row(
            reader.snapshot("episodes").table, reader.snapshot("review_queue").table,
            reader.snapshot("rewards").table, episode_id=episode_id, reviewer=reviewer, verdict=body.verdict,
            note=body.note, reviewed_at=dt.datetime.now(dt.UTC),
        )  # fmt: skip
    except UnknownEpisodeError as exc:
        raise NotFoundError(str(exc)) from exc
    event = control_event(REVIEW, row, "reviewer")
    try:
        publish([event])
    except TrajlakeError as exc:
        raise LogUnavailableError(f"the verdict was not recorded: {exc}; post it again") from exc
    return ReviewAcceptedPublic(event_id=event.event_id, review=ReviewPublic(**row), topic=topic)
