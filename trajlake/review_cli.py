"""``trajlake review ...``: fill the review queue from rules, list it, give a verdict."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from trajlake.terminal import ExitCode, console, err_console, fail, settings

review_app = typer.Typer(
    help="The review queue: episodes people should look at (rules as data), and their verdicts.",
    no_args_is_help=True,
)


class ReviewVerdict(StrEnum):
    """What a reviewer says of an episode."""

    ok = "ok"
    hack = "hack"
    judge_wrong = "judge_wrong"
    task_broken = "task_broken"


def _tables(*names: str) -> list[Any]:
    from lake import Lake
    from schemas.tables import TABLES

    lk = Lake(settings().lake)
    return [lk.read(n) if lk.exists(n) else TABLES[n].empty_table() for n in names]


def _publish(events: list[Any]) -> None:
    from trajlake.loop import curate

    curate(settings(), events)


@review_app.command("fill")
def fill(
    rules: Annotated[
        Path | None,
        typer.Option(
            exists=True, dir_okay=False, help="A rules file (default: the shipped api/review_rules.yaml)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random (calibration) rules.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the items added as JSON.")] = False,
) -> None:
    """Apply the rules to the lake and queue what they find, each item with its reason (events, folded)."""
    from api.review import ReviewRulesError, load_rules, sample
    from schemas.control import REVIEW_ITEM, control_event
    from trajlake.preflight import require_lake

    require_lake(settings().lake, ["episodes", "rewards"])
    try:
        rules_ = load_rules(rules)
    except ReviewRulesError as exc:
        fail(str(exc), ExitCode.USAGE)
    episodes, rewards, queue, reviews = _tables("episodes", "rewards", "review_queue", "reviews")
    items = sample(episodes, rewards, rules_, exclude=queue.column("item_id").to_pylist(),
                   reviewed=reviews.column("episode_id").to_pylist(), seed=seed)  # fmt: skip
    fill_id = f"fill-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    now = dt.datetime.now(dt.UTC)
    rows = [it.row(queued_at=now, fill_id=fill_id) for it in items]
    if rows:
        _publish([control_event(REVIEW_ITEM, r, "review-fill") for r in rows])
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    per_rule = Counter(it.rule for it in items)
    table = Table(title=f"review queue: {len(items)} items added ({fill_id})")
    for col in ("rule", "kind", "added"):
        table.add_column(col)
    for r in rules_:
        table.add_row(r.name, r.kind, str(per_rule.get(r.name, 0)))
    console.print(table)
    err_console.print(
        "`trajlake review queue` lists them; reviewers answer through the API (POST /review/ID)"
    )


@review_app.command("queue")
def queue(
    status: Annotated[str, typer.Option(help="open (no verdict yet) | reviewed | all.")] = "open",
    rule: Annotated[list[str] | None, typer.Option(help="Only items of these rules.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many items, newest first.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print the items as JSON.")] = False,
) -> None:
    """The queue's items, newest first, with why each is there and its verdicts."""
    from api.review import queue_items

    if status not in ("open", "reviewed", "all"):
        fail(f"--status is open, reviewed or all, not {status!r}", ExitCode.USAGE)
    q, reviews = _tables("review_queue", "reviews")
    items = queue_items(q, reviews, status=status, rules=rule)[:limit]
    if as_json:
        print(json.dumps(items, indent=2, default=str))
        return
    table = Table(title=f"review queue ({status}): {len(items)} items")
    for col in ("item", "episode", "task", "rule", "reason", "verdicts"):
        table.add_column(col)
    for it in items:
        verdicts = ", ".join(f"{r['reviewer']}: {r['verdict']}" for r in it["reviews"]) or "-"
        table.add_row(it["item_id"], it["episode_id"][-12:], it["task_id"] or "-", it["rule"],
                      escape(it["reason"]), verdicts)  # fmt: skip
    console.print(table)


@review_app.command("verdict")
def verdict(
    episode: Annotated[str, typer.Argument(help="The episode reviewed.")],
    verdict_: Annotated[
        ReviewVerdict, typer.Option("--verdict", help="ok | hack | judge_wrong | task_broken.")
    ],
    note: Annotated[str | None, typer.Option(help="Why.")] = None,
    by: Annotated[
        str | None, typer.Option(help="Reviewer (default: $TRAJLAKE_USER, else the login).")
    ] = None,
) -> None:
    """Record a verdict on an episode as this machine's user (the API records its token's reviewer)."""
    from api.review import UnknownEpisodeError, review_row
    from schemas.control import REVIEW, REVIEWER, control_event
    from schemas.errors import SchemaError
    from trajlake.failures_cli import curator

    reviewer = (by or curator()).lower()
    if not REVIEWER.fullmatch(reviewer):
        fail(f"reviewer {reviewer!r} must match {REVIEWER.pattern}; give --by NAME", ExitCode.USAGE)
    episodes, q, rewards = _tables("episodes", "review_queue", "rewards")
    try:
        row = review_row(episodes, q, rewards, episode_id=episode, reviewer=reviewer, verdict=verdict_.value,
                         note=note, reviewed_at=dt.datetime.now(dt.UTC))  # fmt: skip
        event = control_event(REVIEW, row, "reviewer")
    except (UnknownEpisodeError, SchemaError) as exc:
        fail(str(exc), ExitCode.USAGE)
    _publish([event])
    console.print(f"[green]{verdict_.value}[/green] on {episode} by {reviewer}, folded into `reviews`")
