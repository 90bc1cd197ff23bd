"""``/search``: episodes whose ids, task, instruction, completions or tool outputs contain a text.

The text searched is a corpus of (episode, step, field, text) rows, built once per
table version and kept in the reader's cache of derived values: the ``steps``
table's ``text`` column of model calls (the completion), tool calls (the
arguments), tool results (stdout and stderr) and annotations, read alone from the
Delta files (never the payloads of every step); each episode's id, task and family
(``episodes``); and its instruction, from the task's spec (``tasks``) or, for an
imported episode, ``episode_started``'s ``metadata.instruction``. A query is one
case-insensitive substring match over that corpus (``pyarrow.compute``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.compute as pc
from fastapi import APIRouter, Query

from api.analysis import newest_first
from api.cursor import PageDep
from api.deps import EpisodesVersion, Limit, ReaderDep, StepsVersion
from api.errors import LakeUnavailableError
from api.lake_reader import LakeReader, Snapshot, versions_of
from api.models import EpisodePublic, SearchHitPublic, SearchPublic, SearchResultPublic
from lake import LakeError

router = APIRouter(prefix="/search", tags=["search"])

CORPUS = pa.schema(
    [
        pa.field("episode_id", pa.string()),
        pa.field("seq", pa.int64()),  # null: a field of the episode, not of a step
        pa.field("field", pa.string()),
        pa.field("text", pa.string()),
    ]
)
"""A row of searchable text."""

STEP_FIELDS = {
    "model_call": "completion",
    "tool_call": "tool_call",
    "tool_result": "tool_output",
    "annotation": "annotation",
}
"""The step types whose ``text`` is searched, and what their text is called in a hit."""

EPISODE_FIELDS = ("episode_id", "task_id", "task_family")
"""Columns of ``episodes`` searched."""

BEFORE, AFTER = 60, 140
"""Characters of context a snippet keeps before and after the match."""


def _corpus(episode_ids: pa.Array, seqs: pa.Array | None, field: str, texts: pa.Array) -> pa.Table:
    n = len(episode_ids)
    return pa.Table.from_arrays(
        [
            episode_ids,
            seqs if seqs is not None else pa.nulls(n, pa.int64()),
            pa.repeat(pa.scalar(field), n),
            texts,
        ],
        schema=CORPUS,
    )


def _read(reader: LakeReader, name: str, version: int, where: str, columns: list[str]) -> pa.Table:
    try:
        return reader.lake.read(name, version=version, where=where, columns=columns)
    except LakeError as exc:
        raise LakeUnavailableError(f"version {version} of table {name} cannot be read: {exc}") from exc


def _string_at(document: str, *path: str) -> str | None:
    """The string at ``path`` in a JSON document (``None``: not JSON, no such key, not a string)."""
    try:
        value: Any = json.loads(document)
    except ValueError:
        return None
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None


def step_corpus(reader: LakeReader, version: int | None) -> pa.Table:
    """The searchable text of every step at ``version`` of ``steps`` (and imported instructions)."""
    if version is None:
        return CORPUS.empty_table()
    types = ", ".join(f"'{t}'" for t in STEP_FIELDS)
    steps = _read(reader, "steps", version, f"type IN ({types})", ["episode_id", "seq", "type", "text"])
    parts = []
    for type_, field in STEP_FIELDS.items():
        rows = steps.filter(pc.equal(steps["type"], type_))
        parts.append(_corpus(rows["episode_id"], rows["seq"], field, rows["text"]))
    # an importer keeps the instruction in episode_started's metadata: parse only those payloads
    started = _read(reader, "steps", version, "type = 'episode_started'", ["episode_id", "payload"])
    started = started.filter(pc.match_substring(started["payload"], '"instruction"'))
    if started.num_rows:
        texts = [_string_at(p, "metadata", "instruction") for p in started["payload"].to_pylist()]
        parts.append(_corpus(started["episode_id"], None, "instruction", pa.array(texts, pa.string())))
    return pa.concat_tables(parts).combine_chunks()


def episode_corpus(episodes: pa.Table, tasks: pa.Table) -> pa.Table:
    """The searchable text of every episode's own columns, and its task's instruction (``tasks``)."""
    parts = [_corpus(episodes["episode_id"], None, f, episodes[f]) for f in EPISODE_FIELDS]
    if tasks.num_rows:
        specs = tasks.select(["task_id", "version", "spec"]).to_pylist()
        instructions = pa.table(
            {
                "task_id": [s["task_id"] for s in specs],
                "task_version": [s["version"] for s in specs],
                "instruction": [_string_at(s["spec"], "instruction") for s in specs],
            },
            schema=pa.schema(
                [("task_id", pa.string()), ("task_version", pa.string()), ("instruction", pa.string())]
            ),
        )
        joined = episodes.select(["episode_id", "task_id", "task_version"]).join(
            instructions, ["task_id", "task_version"], join_type="inner"
        )
        parts.append(_corpus(joined["episode_id"], None, "instruction", joined["instruction"]))
    return pa.concat_tables(parts).combine_chunks()


def snippet(text: str, q: str) -> tuple[str, int, int]:
    """The text around the first case-insensitive match of ``q``, and where the match is in it."""
    found = re.search(re.escape(q), text, re.IGNORECASE)
    if found is None:  # (a case folding Arrow and Python disagree on): the head of the text
        head = text[: BEFORE + AFTER]
        return head + ("\u2026" if len(text) > len(head) else ""), 0, 0
    start, end = max(0, found.start() - BEFORE), min(len(text), found.end() + AFTER)
    lead = "\u2026" if start else ""
    cut = text[start:end] + ("\u2026" if end < len(text) else "")
    return lead + cut, len(lead) + found.start() - start, len(lead) + found.end() - start


_FIELD_ORDER = {"episode_id": 0, "task_id": 1, "task_family": 2, "instruction": 3}


def _hits_of_page(
    hits: pa.Table, page_ids: list[str], q: str, max_hits: int
) -> dict[str, list[SearchHitPublic]]:
    mine = hits.filter(pc.is_in(hits["episode_id"], value_set=pa.array(page_ids, pa.string())))
    # episode fields (seq null) first, then steps in order; at most max_hits per episode
    mine = mine.append_column("order", pc.fill_null(mine["seq"], -1))
    mine = mine.sort_by([("episode_id", "ascending"), ("order", "ascending")])
    picked: list[int] = []
    count: dict[str, int] = {}
    for i, eid in enumerate(mine["episode_id"].to_pylist()):
        count[eid] = count.get(eid, 0) + 1
        if count[eid] <= max_hits:
            picked.append(i)
    rows = mine.take(pa.array(picked, pa.int64())).to_pylist()
    rows.sort(
        key=lambda r: (r["episode_id"], r["seq"] is not None, r["seq"] or 0, _FIELD_ORDER.get(r["field"], 9))
    )
    out: dict[str, list[SearchHitPublic]] = {}
    for r in rows:
        text, start, end = snippet(r["text"], q)
        out.setdefault(r["episode_id"], []).append(
            SearchHitPublic(seq=r["seq"], field=r["field"], snippet=text, match_start=start, match_end=end)
        )
    return out


@router.get("")
def search(
    reader: ReaderDep,
    page: PageDep,
    q: Annotated[
        str,
        Query(
            min_length=1,
            max_length=500,
            description="The text to find (case-insensitive, literal: no wildcards).",
        ),
    ],
    max_hits: Annotated[int, Query(ge=1, le=100, description="Snippets returned per episode.")] = 5,
    limit: Limit = 50,
    version: EpisodesVersion = None,
    steps_version: StepsVersion = None,
) -> SearchPublic:
    """Episodes whose id, task, family, instruction, completions, tool calls or tool outputs contain ``q``.

    Newest first, one page at a time; each with how many places match and a snippet
    per place (at most ``max_hits``), in step order.
    """
    episodes = reader.snapshot("episodes", page.pin("episodes", version))
    tasks = reader.snapshot("tasks", page.pin("tasks", None))
    resolved = reader.resolve("steps", page.pin("steps", steps_version))
    steps = Snapshot("steps", resolved, CORPUS.empty_table())
    # (a stand-in for the steps snapshot: its version keys the cached corpus, which reads two
    # columns of the table itself rather than the whole table with every payload)
    by_step = reader.derived(steps, "search_corpus", lambda _: step_corpus(reader, resolved))
    by_episode = reader.derived(
        episodes, ("search_corpus", tasks.version), lambda t: episode_corpus(t, tasks.table)
    )
    corpus = pa.concat_tables([by_episode, by_step])
    hits = corpus.filter(pc.match_substring(corpus["text"], q, ignore_case=True))
    matching_ids = pc.unique(hits["episode_id"])
    ordered = reader.derived(episodes, "newest_first", newest_first)
    matching = ordered.filter(pc.is_in(ordered["episode_id"], value_set=matching_ids))
    # (steps newer than the episodes version read may hold episodes it does not: not counted)
    hits = hits.filter(pc.is_in(hits["episode_id"], value_set=matching["episode_id"].combine_chunks()))
    rows = matching.slice(page.offset, limit).to_pylist()
    counts: dict[str, int] = {}
    if rows:
        grouped = hits.group_by("episode_id").aggregate([("field", "count")])
        counts = dict(zip(grouped["episode_id"].to_pylist(), grouped["field_count"].to_pylist(), strict=True))
    per_episode = _hits_of_page(hits, [r["episode_id"] for r in rows], q, max_hits) if rows else {}
    versions = versions_of(episodes, steps, tasks)
    return SearchPublic(
        versions=versions,
        q=q,
        total=matching.num_rows,
        hits=hits.num_rows,
        limit=limit,
        offset=page.offset,
        next_cursor=page.next(versions, limit, matching.num_rows),
        items=[
            SearchResultPublic(
                episode=EpisodePublic(**row),
                hit_count=counts.get(row["episode_id"], 0),
                hits=per_episode.get(row["episode_id"], []),
            )
            for row in rows
        ],
    )
