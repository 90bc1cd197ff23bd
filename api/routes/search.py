"""``/search``: episodes whose ids, task, instruction, completions or tool outputs contain a text.

What is searched: the ``steps`` table's ``text`` column of model calls (the completion), tool
calls (the arguments), tool results (stdout and stderr) and annotations; each episode's id, task
and family (``episodes``); and its instruction, from the task's spec (``tasks``) or, for an
imported episode, ``episode_started``'s ``metadata.instruction``. A query is a case-insensitive
substring match (``pyarrow.compute``). The steps are scanned in batches, reading four columns,
and only where the query matched is kept (per steps version and query, in the reader's cache of
derived values, so the pages of one search scan once); the texts of the page's hits are read
again for their snippets. The episodes' and instructions' text is small and kept per version.
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
from api.text_index import HITS, LOCATED, STEP_FIELDS
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


BATCH_ROWS = 1 << 16
"""Rows of ``steps`` matched at a time: a search holds one batch and its hits, never the table."""


def _dataset(reader: LakeReader, version: int) -> Any:
    try:
        return reader.lake.table("steps", version).to_pyarrow_dataset()
    except (LakeError, OSError) as exc:
        raise LakeUnavailableError(f"version {version} of table steps cannot be read: {exc}") from exc


def step_hits(reader: LakeReader, version: int | None, q: str) -> pa.Table:
    """Every step at ``version`` whose searched text contains ``q`` (case-insensitive): :data:`HITS` rows.

    With the reader's text index, from the index entries of the version's data files (a file
    without one yet is scanned and queued for the index's builder). Without one, the match is
    pushed into a scan of the ``steps`` table's ``episode_id``, ``seq``, ``type`` and ``text``
    columns (read a batch at a time by Arrow's threads); what is kept is where it matched.
    """
    if version is None:
        return LOCATED.empty_table()
    if reader.text_index is not None:
        try:
            return reader.text_index.hits(_fragments(reader, version), q)
        except OSError as exc:
            raise LakeUnavailableError(f"version {version} of table steps cannot be read: {exc}") from exc
    dataset = _dataset(reader, version)
    types = pa.array(list(STEP_FIELDS), pa.string())
    names = pa.array(list(STEP_FIELDS.values()), pa.string())
    columns = ["episode_id", "seq", "type"]
    try:  # the match pushed into the scan: its threads read and match, only hits come back
        found = dataset.to_table(
            columns=columns, filter=pc.match_substring(pc.field("text"), q, ignore_case=True)
        )
    except pa.ArrowNotImplementedError:  # (text as string views: matched a batch at a time, cast)
        parts = []
        for batch in dataset.to_batches(columns=[*columns, "text"], batch_size=BATCH_ROWS):
            mask = pc.match_substring(batch.column("text").cast(pa.string()), q, ignore_case=True)
            parts.append(pa.Table.from_batches([batch.filter(mask).select(columns)]))
        found = pa.concat_tables(parts) if parts else None
    if found is None or not found.num_rows:
        return LOCATED.empty_table()
    kind = pc.index_in(found["type"].cast(pa.string()), value_set=types)
    searched = pc.is_valid(kind)
    found, kind = found.filter(searched), pc.filter(kind, searched)
    n = found.num_rows
    return pa.Table.from_arrays(
        [found["episode_id"].cast(pa.string()), found["seq"].cast(pa.int64()), pc.take(names, kind),
         pa.nulls(n, pa.int32()), pa.nulls(n, pa.int32())],
        schema=LOCATED,
    ).combine_chunks()  # fmt: skip


def _fragments(reader: LakeReader, version: int) -> list[Any]:
    """The data files of ``steps`` at ``version``, as the text index lists them (kept per version)."""
    return reader.text_index.fragments(  # type: ignore[no-any-return]
        (reader.lake.root, version), lambda: _dataset(reader, version).get_fragments()
    )


def instruction_corpus(reader: LakeReader, version: int | None, imported: pa.Array) -> pa.Table:
    """The instructions imported episodes carry in ``episode_started``'s metadata (:data:`CORPUS` rows).

    Only the ``episode_started`` rows of ``imported`` episodes are read (a rollout's instruction
    is its task's, searched from ``tasks``).
    """
    if version is None or len(imported) == 0:
        return CORPUS.empty_table()
    ids = ", ".join("'" + str(e).replace("'", "''") + "'" for e in imported.to_pylist())
    started = _read(reader, "steps", version, f"type = 'episode_started' AND episode_id IN ({ids})",
                    ["episode_id", "payload"])  # fmt: skip
    started = started.filter(pc.match_substring(started["payload"], '"instruction"'))
    if not started.num_rows:
        return CORPUS.empty_table()
    texts = [_string_at(p, "metadata", "instruction") for p in started["payload"].to_pylist()]
    return _corpus(started["episode_id"], None, "instruction", pa.array(texts, pa.string()))


def _texts(reader: LakeReader, version: int | None, hits: pa.Table) -> dict[tuple[str, int], str]:
    """The text of each step hit of one page.

    From the text index where it found them; the others in one read of ``steps``, pruned by the
    page's episodes (which, spread over the table's files, reads many).
    """
    if version is None or not hits.num_rows:
        return {}
    out: dict[tuple[str, int], str] = {}
    if reader.text_index is not None and pc.any(pc.is_valid(hits["row"])).as_py():
        located = hits.filter(pc.is_valid(hits["row"]))
        texts = reader.text_index.texts(
            _fragments(reader, version), located["file"].to_pylist(), located["row"].to_pylist()
        )
        keys = zip(located["episode_id"].to_pylist(), located["seq"].to_pylist(), strict=True)
        out = {k: t for k, t in zip(keys, texts, strict=True) if t is not None}
        hits = hits.filter(pc.invert(pc.is_valid(hits["row"])))
    wanted = {
        k for k in zip(hits["episode_id"].to_pylist(), hits["seq"].to_pylist(), strict=True) if k not in out
    }
    if not wanted:
        return out
    ids = ", ".join("'" + e.replace("'", "''") + "'" for e in sorted({e for e, _ in wanted}))
    rows = _read(reader, "steps", version, f"episode_id IN ({ids})", ["episode_id", "seq", "text"])
    for e, s, t in zip(rows["episode_id"].to_pylist(), rows["seq"].to_pylist(), rows["text"].to_pylist(),
                       strict=True):  # fmt: skip
        if (e, s) in wanted and t is not None:
            out[(e, s)] = t
    return out


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
TEXT = pa.field("text", pa.string())


def _hits_of_page(
    hits: pa.Table, page_ids: list[str], q: str, max_hits: int, texts: Any
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
    steps = [r for r in rows if r["text"] is None and r["seq"] is not None]
    found = texts(pa.Table.from_pylist(steps, schema=LOCATED.append(TEXT))) if steps else {}
    for r in steps:
        r["text"] = found.get((r["episode_id"], r["seq"]), "")
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
    steps = Snapshot("steps", resolved, HITS.empty_table())
    # (a stand-in for the steps snapshot: its version keys what is derived from it; the table
    # itself is scanned in batches, never held)
    by_episode = reader.derived(
        episodes, ("search_corpus", tasks.version), lambda t: episode_corpus(t, tasks.table)
    )
    imported = reader.derived(
        episodes,
        "imported",
        lambda t: t.filter(pc.equal(t["source"], "import"))["episode_id"].combine_chunks(),
    )
    by_instruction = reader.derived(
        steps,
        ("search_instructions", episodes.version),
        lambda _: instruction_corpus(reader, resolved, imported),
    )
    ordered = reader.derived(episodes, "newest_first", newest_first)
    key = (resolved, tasks.version, q.lower())

    def every_hit(_: pa.Table) -> pa.Table:
        corpus = pa.concat_tables([by_episode, by_instruction])
        in_steps = reader.derived(steps, ("search", q.lower()), lambda _: step_hits(reader, resolved, q))
        fields = corpus.filter(pc.match_substring(corpus["text"], q, ignore_case=True))
        nowhere = pa.nulls(fields.num_rows, pa.int32())
        found = pa.concat_tables([
            fields.append_column("file", nowhere).append_column("row", nowhere),
            in_steps.append_column(TEXT, pa.nulls(in_steps.num_rows, pa.string())),
        ], promote_options="permissive")  # fmt: skip
        return found

    def in_episodes(_: pa.Table) -> pa.Table:
        found = reader.derived(episodes, ("search_found", *key), every_hit)
        return ordered.filter(pc.is_in(ordered["episode_id"], value_set=pc.unique(found["episode_id"])))

    def counted(_: pa.Table) -> pa.Table:
        # (steps newer than the episodes version read may hold episodes it does not: not counted;
        # the set looked up is the matching episodes', small for a rare word)
        found = reader.derived(episodes, ("search_found", *key), every_hit)
        return found.filter(pc.is_in(found["episode_id"], value_set=matching["episode_id"].combine_chunks()))

    # what matched, per (episodes, steps, tasks) versions and query: the pages of one search look once
    matching = reader.derived(episodes, ("search_matching", *key), in_episodes)
    hits = reader.derived(episodes, ("search_hits", *key), counted)
    rows = matching.slice(page.offset, limit).to_pylist()
    page_ids = [r["episode_id"] for r in rows]
    mine = hits.filter(pc.is_in(hits["episode_id"], value_set=pa.array(page_ids, pa.string())))
    counts: dict[str, int] = {}
    if rows:
        grouped = mine.group_by("episode_id").aggregate([("field", "count")])
        counts = dict(zip(grouped["episode_id"].to_pylist(), grouped["field_count"].to_pylist(), strict=True))
    per_episode = (
        _hits_of_page(mine, page_ids, q, max_hits, lambda h: _texts(reader, resolved, h)) if rows else {}
    )
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
