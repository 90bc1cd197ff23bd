"""``trajlake failures ...``: the failure-case library (recurring failures, and the cases people save).

``cases`` groups the ``failures`` table of one judge version by (task family, category,
normalised signature); ``curate`` saves one of those clusters as a named case: a ``case:<name>``
control stream on the curation topic, folded into ``failure_cases`` (so a replay rebuilds it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import json
import os
import socket
from typing import TYPE_CHECKING, Annotated, Any

import pyarrow as pa
import pyarrow.compute as pc
import typer
from rich.markup import escape
from rich.table import Table

from trajlake.options import LakeOpt
from trajlake.terminal import ExitCode, console, err_console, fail, settings

if TYPE_CHECKING:
    from api.analysis import FailureCluster
    from lake import Lake

failures_app = typer.Typer(
    help="The failure-case library: recurring failures and curated cases.", no_args_is_help=True
)

JudgeOpt = Annotated[
    str | None, typer.Option("--judge", help="Judge name (default: the only one that scored).")
]
JudgeVersionOpt = Annotated[str | None, typer.Option(help="Judge version (default: its latest).")]

EPISODES_KEPT = 5_000
"""Most episode ids a case keeps (the newest); ``count`` says how many the cluster had."""
OBSERVATION_HEAD, OBSERVATION_TAIL = 4_096, 12_288
"""What a case keeps of its failing step's observation: its head and its tail (errors come last)."""


def _clusters(
    lk: Lake, judge: str | None, judge_version: str | None, *, examples: int, min_count: int = 1
) -> tuple[str | None, str | None, list[FailureCluster], pa.Table]:
    """The (judge, version) asked for or defaulted, its failure clusters, and its failure rows."""
    from api.analysis import choose_judge, failure_clusters, judge_versions, judged_by
    from api.errors import InvalidRequestError

    failures = lk.read("failures")
    rewards = lk.read("rewards", columns=["episode_id", "judge_name", "judge_version", "verdict", "ts"])
    episodes = lk.read("episodes", columns=["episode_id", "task_family", "policy_version", "started_at"])
    try:
        name, version = choose_judge(judge_versions(rewards), judge, judge_version, failures=failures)
    except InvalidRequestError as exc:  # (the API's words name its query parameter)
        fail(str(exc).replace("judge=<name>", "--judge NAME"), ExitCode.USAGE)
    mine = judged_by(failures, name, version)
    return name, version, failure_clusters(mine, episodes, min_count=min_count, examples=examples), mine


def _curated(lk: Lake) -> dict[str, list[str]]:
    """Case names by the cluster they were curated from."""
    from api.analysis import cases_by_cluster

    if "failure_cases" not in lk.versions():
        return {}
    return cases_by_cluster(lk.read("failure_cases", columns=["case_id", "cluster_id"]))


def curator() -> str:
    """Who is acting: ``$TRAJLAKE_USER``, else the login."""
    return os.environ.get("TRAJLAKE_USER") or _login()


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # (a user id with no name: containers)
        return f"uid-{os.getuid()}"


def _trend(trend: list[tuple[str | None, int]]) -> str:
    shown = [f"{v or '-'}:{n}" for v, n in trend[-4:]]
    return ("... " if len(trend) > 4 else "") + " -> ".join(shown)


@failures_app.command("cases")
def cases(
    judge: JudgeOpt = None,
    judge_version: JudgeVersionOpt = None,
    family: Annotated[str | None, typer.Option(help="Only this task family.")] = None,
    category: Annotated[str | None, typer.Option(help="Only this failure category.")] = None,
    min_count: Annotated[int, typer.Option(min=1, help="Smallest cluster shown.")] = 1,
    examples: Annotated[int, typer.Option(min=0, max=100, help="Example episodes per cluster.")] = 5,
    limit: Annotated[int, typer.Option(min=0, help="Clusters printed (0: all; --json prints all).")] = 30,
    lake: LakeOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every cluster as JSON.")] = False,
) -> None:
    """Recurring failures: one judge version's failures by (task family, category, signature).

    Each cluster has an id (stable as the lake grows), its count, the tasks involved, the trend
    over policy versions (in the order they first acted) and its newest episodes; a cluster saved
    with ``failures curate`` names its case.
    """
    from trajlake.preflight import require_lake

    lk = require_lake(lake or settings().lake, ["failures", "rewards", "episodes"])
    name, version, found, _ = _clusters(lk, judge, judge_version, examples=examples, min_count=min_count)
    found = [
        c
        for c in found
        if (family is None or c.family == family) and (category is None or c.category == category)
    ]
    curated = _curated(lk)
    if as_json:
        print(json.dumps([
            {"cluster_id": c.cluster_id, "family": c.family, "category": c.category, "signature": c.signature,
             "count": c.count, "examples": c.examples, "tasks": [list(t) for t in c.tasks],
             "trend": [list(t) for t in c.trend], "message": c.message, "first_seen": c.first_seen,
             "last_seen": c.last_seen, "judge_name": name, "judge_version": version,
             "cases": curated.get(c.cluster_id, [])}
            for c in found
        ], default=str, indent=2))  # fmt: skip
        return
    total = sum(c.count for c in found)
    table = Table(title=f"failure clusters of {name or '-'} {version or '-'} ({total} failed episodes)")
    for col in (
        "cluster",
        "family",
        "category",
        "count",
        "tasks",
        "trend (policy:failures)",
        "signature",
        "case",
    ):
        table.add_column(col, overflow="fold")
    for c in found[: limit or None]:
        table.add_row(
            c.cluster_id,
            escape(c.family or "-"),
            c.category,
            str(c.count),
            str(len(c.tasks)),
            escape(_trend(c.trend)),
            escape(c.signature[:160]),
            escape(", ".join(curated.get(c.cluster_id, []))),
        )
    console.print(table)
    if limit and len(found) > limit:
        err_console.print(f"{len(found) - limit} smaller clusters not shown (--limit 0 shows all)")
    if not found:
        err_console.print(
            "no failures under this judge version" + (" and filter" if family or category else "")
        )


def _output_tails(evidence: Any, depth: int = 0) -> list[str]:
    """The test output a judge kept in its evidence (``output_tail``; a composite's per component)."""
    if not isinstance(evidence, dict) or depth > 2:
        return []
    own = evidence.get("output_tail")
    out = [own] if isinstance(own, str) and own.strip() else []
    for key in sorted(evidence, key=str):
        if key != "output_tail":
            out += _output_tails(evidence[key], depth + 1)
    return out


def failing_observation(
    lk: Lake, episode_id: str, failing_seq: int | None, judge: str, version: str
) -> str | None:
    """What the episode saw at its failing step, head and tail.

    A tool's output at a failing tool step; at a failing judgement (the judge's own step, or a
    re-judgement's, which is no step of the episode) the test output the judge kept, else the
    last tool output before it; without either, the last tool output.
    """
    steps = lk.read_episodes_rows("steps", [episode_id], columns=["seq", "type", "text"]).to_pylist()
    at = [s for s in steps if s["seq"] == failing_seq]
    outputs = sorted((s for s in steps if s["type"] == "tool_result"), key=lambda s: s["seq"])
    before = [s for s in outputs if failing_seq is None or s["seq"] < failing_seq]
    text = None
    if not at or at[0]["type"] != "tool_result":
        rewards = lk.read_episodes_rows(
            "rewards", [episode_id], columns=["judge_name", "judge_version", "evidence"]
        )
        for r in rewards.to_pylist():
            if (r["judge_name"], r["judge_version"]) == (judge, version) and r["evidence"]:
                with contextlib.suppress(ValueError):
                    text = "\n".join(_output_tails(json.loads(r["evidence"]))) or None
        if text is None:
            shown = before if at and at[0]["type"] == "reward" else outputs
            text = shown[-1]["text"] if shown else None
    else:
        text = at[0]["text"]
    if text is None or len(text) <= OBSERVATION_HEAD + OBSERVATION_TAIL:
        return text
    cut = len(text) - OBSERVATION_HEAD - OBSERVATION_TAIL
    return f"{text[:OBSERVATION_HEAD]}\n[... {cut} characters ...]\n{text[-OBSERVATION_TAIL:]}"


def case_row(
    lk: Lake,
    whole: FailureCluster,
    failures: pa.Table,
    judge: str,
    version: str,
    *,
    name: str,
    notes: str | None,
    by: str,
) -> dict[str, Any]:
    """The ``failure_cases`` row that saves ``whole`` (its examples: every episode kept) as the case ``name``.

    ``failures`` are the judge version's failure rows the cluster was made from.
    """
    newest = whole.examples[0]
    mine = failures.filter(pc.equal(failures["episode_id"], newest)).to_pylist()
    failing_seq = mine[0]["failing_seq"] if mine else None
    return {
        "case_id": name,
        "cluster_id": whole.cluster_id,
        "family": whole.family,
        "category": whole.category,
        "signature": whole.signature,
        "judge_name": judge,
        "judge_version": version,
        "count": whole.count,
        "episode_ids": whole.examples,
        "task_ids": sorted({t for t, _ in whole.tasks if t is not None}),
        "policy_versions": [v for v, _ in whole.trend if v is not None],
        "example_episode_id": newest,
        "failing_seq": failing_seq,
        "failing_observation": failing_observation(lk, newest, failing_seq, judge, version),
        "message": mine[0]["message"] if mine else whole.message,
        "notes": notes,
        "curated_by": by,
        "curated_at": dt.datetime.now(dt.UTC),
    }


@failures_app.command("curate")
def curate(
    cluster: Annotated[
        str, typer.Argument(help="A cluster id from `trajlake failures cases` (or its unique start).")
    ],
    name: Annotated[
        str, typer.Option("--name", help="The case's name (its id; curating a name again updates it).")
    ],
    note: Annotated[str | None, typer.Option("--note", help="What a person noticed about it.")] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who curates it (default: this user).")] = None,
    judge: JudgeOpt = None,
    judge_version: JudgeVersionOpt = None,
    lake: LakeOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the case's row as JSON.")] = False,
) -> None:
    """Save a failure cluster as a named case in the failure-case library.

    The case (its episodes, the failing step's observation of its newest episode, your note) is
    an event on the curation topic; the pipeline folds it into ``failure_cases`` right after, so
    a replay rebuilds the library. Needs the broker.
    """
    from ingest.kafka_broker import require_topic
    from ingest.publish import publish_events
    from pipelines import run_once
    from schemas.control import CASE, CASE_ID, control_event
    from trajlake.preflight import require_lake

    if not CASE_ID.fullmatch(name):
        fail(
            f"--name {name!r} is not a case name: lower-case letters, digits, '.', '_' and '-', starting "
            "with a letter or digit, at most 80 characters (e.g. pyfix-off-by-one)",
            ExitCode.USAGE,
        )
    if len(cluster) < 4:
        fail(f"{cluster!r} is too short to name a cluster: give its id (fc-...) or at least its first 4 "
             "characters", ExitCode.USAGE)  # fmt: skip
    s = settings()
    lk = require_lake(lake or s.lake, ["failures", "rewards", "episodes", "steps"])
    jn, jv, found, judged = _clusters(lk, judge, judge_version, examples=EPISODES_KEPT)
    matches = [c for c in found if c.cluster_id == cluster] or [
        c for c in found if c.cluster_id.startswith(cluster)
    ]
    if not matches or jn is None or jv is None:
        fail(
            f"no failure cluster {cluster!r} under judge {jn or '-'} {jv or '-'}; `trajlake failures cases` "
            "lists them (--judge/--judge-version for another judge)",
            ExitCode.USAGE,
        )
    if len(matches) > 1:
        fail(f"{cluster!r} starts {len(matches)} cluster ids; give more of it", ExitCode.USAGE)
    who = by or curator()
    row = case_row(lk, matches[0], judged, jn, jv, name=name, notes=note, by=who)
    event = control_event(CASE, row, f"curator@{socket.gethostname()}")
    require_topic(s.kafka_bootstrap, s.topic_curation)
    publish_events(s.kafka_bootstrap, s.topic_curation, [event])
    cfg = s.pipeline_config(lake)
    run_once(cfg)
    if as_json:
        print(json.dumps(row, default=str, indent=2))
    err_console.print(
        f"case [bold]{escape(name)}[/bold] saved: {row['count']} failed episodes of {row['category']} in "
        f"{escape(row['family'] or '-')}; published to {s.topic_curation} and folded: `failure_cases` in "
        f"{lk.root} at version {lk.versions()['failure_cases']}"
    )
