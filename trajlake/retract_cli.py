"""``trajlake retract``: take an episode, a group, a task version or a judge version out of training."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from trajlake.terminal import ExitCode, console, err_console, fail, settings


def retract(
    reason: Annotated[str, typer.Option(help="Why: a confirmed hack, a broken task, a failed canary.")],
    episode: Annotated[str | None, typer.Option(help="An episode id.")] = None,
    group: Annotated[str | None, typer.Option(help="A group id (all its attempts).")] = None,
    task: Annotated[str | None, typer.Option(help="A task version, TASK_ID@VERSION.")] = None,
    judge: Annotated[
        str | None, typer.Option(help="A judge version, NAME@VERSION (all its rewards).")
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="The retraction's id (default: rt- and 12 hex of what it names).")
    ] = None,
    by: Annotated[str | None, typer.Option(help="Who (default: $TRAJLAKE_USER, else the login).")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the retraction and the impacted checkpoints.")
    ] = False,
) -> None:
    """Take data out of training from now on (an event, folded into `retractions`); name what trained on it.

    Datasets read after it exclude what it names, counted as `retracted`; the checkpoints that
    trained on it already, and their descendants, are listed (`trajlake lineage --impacted-by ID`).
    """
    from ingest.kafka_broker import require_broker, require_topic
    from learners.retractions import impacted_checkpoints
    from schemas.control import RETRACTION, control_event
    from schemas.errors import SchemaError
    from trajlake.failures_cli import curator
    from trajlake.loop import curate

    named = [(s, t) for s, t in (("episode", episode), ("group", group), ("task_version", task),
                                 ("judge_version", judge)) if t]  # fmt: skip
    if len(named) != 1:
        fail("name one thing to retract: --episode, --group, --task ID@VERSION or --judge NAME@VERSION",
             ExitCode.USAGE)  # fmt: skip
    (scope, target), s = named[0], settings()
    rid = name or "rt-" + hashlib.sha256(f"{scope}\x1f{target}".encode()).hexdigest()[:12]
    row = {"retraction_id": rid, "scope": scope, "target": target, "reason": reason,
           "retracted_by": by or curator(), "retracted_at": dt.datetime.now(dt.UTC)}  # fmt: skip
    try:
        event = control_event(RETRACTION, row, "retraction")
    except SchemaError as exc:
        fail(str(exc), ExitCode.USAGE)
    existing = _stored(s.lake, rid)
    if existing is not None and (existing["scope"], existing["target"]) != (scope, target):
        fail(f"retraction {rid} exists already and names {existing['scope']} {existing['target']} (a "
             "retraction is never rewritten); give another --name", ExitCode.USAGE)  # fmt: skip
    require_broker(s.kafka_bootstrap)
    require_topic(s.kafka_bootstrap, s.topic_curation)
    if existing is None:
        curate(s, [event])
        stored = _stored(s.lake, rid)
        if stored is None or (stored["scope"], stored["target"]) != (scope, target):
            held = (stored["scope"], stored["target"]) if stored else None
            fail(f"retraction {rid} was sent but the lake holds {held}; `trajlake lake show retractions` "
                 "shows it", ExitCode.FAILED)  # fmt: skip
    else:
        row = existing
    if not _matches(s.lake, scope, target):
        err_console.print(f"[yellow]warning:[/yellow] nothing in the lake matches {scope} "
                          f"{escape(target)} yet (it will exclude what arrives)")  # fmt: skip
    impacted = impacted_checkpoints(s.lake, rid)
    if as_json:
        print(json.dumps({"retraction": row, "impacted": impacted}, indent=2, default=str))
        return
    console.print(f"[green]{rid}[/green]: {scope} {escape(target)} retracted ({escape(reason)}); "
                  "datasets read from now on exclude it (`retracted`)")  # fmt: skip
    _print_impacted(impacted, rid)


def _stored(lake: Any, rid: str) -> dict[str, Any] | None:
    from lake import Lake, sql_literal

    lk = Lake(lake)
    if not lk.exists("retractions"):
        return None
    rows = lk.read("retractions", where=f"retraction_id = {sql_literal(rid)}").to_pylist()
    return rows[0] if rows else None


def _matches(lake: Any, scope: str, target: str) -> bool:
    """Whether the lake holds anything a retraction of ``scope`` ``target`` takes out."""
    from lake import Lake, sql_literal

    lk = Lake(lake)
    name, _, version = target.rpartition("@")
    where, table = {
        "episode": (f"episode_id = {sql_literal(target)}", "episodes"),
        "group": (f"group_id = {sql_literal(target)}", "episodes"),
        "task_version": (
            f"task_id = {sql_literal(name)} AND task_version = {sql_literal(version)}",
            "episodes",
        ),
        "judge_version": (
            f"judge_name = {sql_literal(name)} AND judge_version = {sql_literal(version)}",
            "rewards",
        ),
    }[scope]
    return lk.exists(table) and lk.read(table, where=where, columns=["episode_id"]).num_rows > 0


def _print_impacted(impacted: list[dict[str, Any]], rid: str) -> None:
    if not impacted:
        console.print(f"no checkpoint trained on what {rid} names")
        return
    table = Table(title=f"checkpoints impacted by {rid}")
    for col in ("checkpoint", "created", "trained on retracted", "via", "path"):
        table.add_column(col)
    for c in impacted:
        table.add_row(c["checkpoint_id"], str(c["created_at"])[:19], str(c["trained_on_retracted"] or "-"),
                      c["via"] or "-", c["path"])  # fmt: skip
    console.print(table)
