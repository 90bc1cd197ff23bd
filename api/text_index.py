"""A text index of the ``steps`` table, one entry per Delta data file, for ``/search``.

Why: a search for a word nobody asked before scanned every step's text (1.2 GB at 10M events,
about 3.5 s on two cores, as DuckDB's own scan). The index answers from a term dictionary and
posting lists instead, and reads the text only of the rows it must check.

What an entry holds (Arrow IPC files, read memory-mapped):
- ``rows``: the searched rows of the data file (episode id, seq, what the text is, the text);
- ``terms``: every term of those texts, sorted, with where its postings end;
- ``postings``: for each term, the rows (of ``rows``) whose text holds it, ascending.

Terms: the text is lower-cased (Arrow's ``utf8_lower``; a long s ``ſ`` is first made ``s``)
and cut at ASCII characters that are not letters, digits or ``_``; every other character,
non-ASCII ones included, belongs to a term. Delta data files never change, so an entry is built
once per file (keyed by the file's name, which holds a UUID) and serves every table version
that contains the file; a file not indexed yet is scanned, and queued for the builder.

The semantics stay those of the scan: a case-insensitive literal substring match (RE2's case
folding, ``pyarrow.compute.match_substring(ignore_case=True)``). An ASCII query is cut the same
way into tokens; each token must occur in a term, as the term itself when separators surround it
in the query, as its start or end when the query starts or ends inside it. Every row that truly
matches passes these conditions (an ASCII query character is matched by RE2 only by itself, its
other case, the Kelvin sign or a long s, which the terms hold as the same letter; separators only
by themselves), so the rows they leave are a superset, which is then checked with the very match
the scan uses. A query with a non-ASCII character, or with no token, is matched against the
entry's text directly (still no Parquet decoding).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import re
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)

FORMAT = 3
"""Bumped when an entry's layout or its terms change: entries of another format are rebuilt."""

STEP_FIELDS = {
    "model_call": "completion",
    "tool_call": "tool_call",
    "tool_result": "tool_output",
    "annotation": "annotation",
}
"""The step types whose ``text`` is searched, and what their text is called in a hit."""

HITS = pa.schema(
    [pa.field("episode_id", pa.string()), pa.field("seq", pa.int64()), pa.field("field", pa.string())]
)
"""Where a query matched a step."""

LOCATED = HITS.append(pa.field("file", pa.int32())).append(pa.field("row", pa.int32()))
""":data:`HITS` with where the step's text is in the index: the data file (its position in the
fragments searched) and the entry's row; null for a file that was scanned."""

ROWS = pa.schema(
    [
        pa.field("episode_id", pa.dictionary(pa.int32(), pa.string())),
        pa.field("seq", pa.int64()),
        pa.field("field", pa.dictionary(pa.int8(), pa.string())),
        pa.field("text", pa.large_string()),
    ]
)
"""An entry's rows (episode ids and fields dictionary-encoded: a hit takes a code, not a string)."""
TERMS = pa.schema([pa.field("term", pa.large_string()), pa.field("end", pa.int64())])
POSTINGS = pa.schema([pa.field("row", pa.uint32())])

_SEPARATORS = "".join(chr(c) for c in range(128) if not (chr(c).isalnum() or chr(c) == "_"))
SEPARATOR = re.compile("[" + re.escape(_SEPARATORS) + "]+")
"""What cuts a text into terms: a run of ASCII characters other than letters, digits and ``_``."""

_WORD = np.ones(256, dtype=bool)
_WORD[[ord(c) for c in _SEPARATORS]] = False
"""Per UTF-8 byte: part of a term (every byte of a multi-byte character is >= 0x80: a term's)."""

MANY_TERMS = 32
"""Above this many matching terms, postings are selected by a mask rather than sliced one by one."""

FEW = 256
"""Candidate rows below which the other tokens are not looked up: the rows' text is checked anyway."""


# --------------------------------------------------------------------------- terms


def _normalised(text: pa.Array) -> pa.StringArray:
    """Lower-cased text (a long s made ``s`` first: RE2 folds it with ``s``, lower-casing does not)."""
    if pc.any(pc.match_substring(text, "\u017f")).as_py():
        text = pc.replace_substring(text, "\u017f", "s")
    out = pc.utf8_lower(text)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    return out.cast(pa.large_string())


def terms_of(text: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The terms of each text, in order: ``(terms, row)``, ``row[i]`` the text term ``i`` is in."""
    norm = _normalised(text)
    n = len(norm)
    if norm.offset:
        norm = pa.concat_arrays([norm])  # (an unsliced copy: its buffers start at row 0)
    offsets = np.frombuffer(norm.buffers()[1], dtype=np.int64)[: n + 1]
    data = np.frombuffer(norm.buffers()[2], dtype=np.uint8)[: int(offsets[-1])] if n else np.empty(0, "u1")
    word = _WORD[data]
    start = word.copy()
    start[1:] &= ~word[:-1]
    starts_of_rows = offsets[:-1][offsets[:-1] < len(data)]
    start[starts_of_rows] = word[starts_of_rows]  # a row's first byte starts a term of its own
    positions = np.flatnonzero(start)
    ntok = len(positions)
    if not ntok:
        return pa.array([], pa.large_string()), np.empty(0, np.int64)
    token_of_byte = np.cumsum(start)[word] - 1
    lengths = np.bincount(token_of_byte, minlength=ntok)
    ends = np.zeros(ntok + 1, dtype=np.int64)
    np.cumsum(lengths, out=ends[1:])
    chars = np.ascontiguousarray(data[word])
    terms = pa.LargeStringArray.from_buffers(ntok, pa.py_buffer(ends), pa.py_buffer(chars))
    rows = np.searchsorted(offsets, positions, side="right") - 1
    return terms, rows


CHUNK_BYTES = 8 << 20
"""Text cut into terms at a time when an entry is built (the cut takes about 20 bytes a byte)."""


def postings_of(text: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """``(terms sorted, ends, rows)``: term ``i``'s rows are ``rows[ends[i-1]:ends[i]]``, ascending.

    The rows are cut into terms about :data:`CHUNK_BYTES` of text at a time, each chunk's
    (term, row) pairs made unique with a vocabulary of its own; the vocabularies are then merged.
    """
    n = len(text)
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    sizes = np.cumsum(pc.fill_null(pc.binary_length(text), 0).to_numpy(zero_copy_only=False))
    cuts = [0]
    while cuts[-1] < n:
        done = int(sizes[cuts[-1] - 1]) if cuts[-1] else 0
        cuts.append(max(cuts[-1] + 1, int(np.searchsorted(sizes, done + CHUNK_BYTES, side="right"))))
        cuts[-1] = min(cuts[-1], n)
    vocabularies: list[pa.Array] = []
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        tokens, rows = terms_of(text.slice(lo, hi - lo))
        if not len(tokens):
            continue
        encoded = tokens.dictionary_encode()
        width = hi - lo
        keys = np.unique(encoded.indices.to_numpy().astype(np.int64) * width + rows)
        vocabularies.append(encoded.dictionary)
        pairs.append((keys // width, keys % width + lo))
    if not vocabularies:
        return pa.array([], pa.large_string()), np.empty(0, np.int64), np.empty(0, np.uint32)
    merged = pa.concat_arrays(vocabularies).dictionary_encode()
    vocabulary = merged.dictionary
    order = pc.array_sort_indices(vocabulary).to_numpy()
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order), dtype=order.dtype)
    global_ids = rank[merged.indices.to_numpy()].astype(np.int64)
    keys_all, start = [], 0
    for vocab, (codes, rows) in zip(vocabularies, pairs, strict=True):
        keys_all.append(global_ids[start + codes] * max(n, 1) + rows)
        start += len(vocab)
    keys = np.sort(np.concatenate(keys_all))  # (unique: a chunk's pairs are, and chunks hold other rows)
    term_ids = keys // max(n, 1)
    ends = np.searchsorted(term_ids, np.arange(1, len(order) + 1), side="left").astype(np.int64)
    return vocabulary.take(pa.array(order)), ends, (keys % max(n, 1)).astype(np.uint32)


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Token:
    """One token of a query, and where in a term it must occur."""

    text: str
    kind: str
    """``equal``, ``starts``, ``ends`` or ``contains``: how it must occur in a term."""


def plan(q: str) -> list[Token] | None:
    """The tokens an ASCII query's matches must have in their terms (None: match the text directly)."""
    if not q.isascii():
        return None
    parts = SEPARATOR.split(q.lower())
    out = []
    for i, part in enumerate(parts):
        if not part:
            continue
        left, right = i == 0, i == len(parts) - 1  # the query starts (ends) inside this token
        kind = "contains" if left and right else "ends" if left else "starts" if right else "equal"
        out.append(Token(part, kind))
    # the longest first: the rarest, usually, so the others have less to narrow
    return sorted(out, key=lambda t: -len(t.text)) or None


def _matching_terms(terms: pa.Array, token: Token) -> pa.Array:
    if token.kind == "equal":
        found = pc.index_in(pa.array([token.text], pa.large_string()), value_set=terms)[0].as_py()
        return pa.array([] if found is None else [found], pa.int64())
    match = {"starts": pc.starts_with, "ends": pc.ends_with, "contains": pc.match_substring}[token.kind]
    return pc.indices_nonzero(match(terms, token.text))


# --------------------------------------------------------------------------- entries


class Entry:
    """One data file's index, memory-mapped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = _read(path / "rows.arrow")
        terms = _read(path / "terms.arrow")
        self.terms = _array(terms.column("term"))
        self.ends = _array(terms.column("end")).to_numpy()
        self.postings = _array(_read(path / "postings.arrow").column("row")).to_numpy()
        self.text = _array(self.rows.column("text"))

    def matching_rows(self, q: str, tokens: list[Token] | None) -> np.ndarray:
        """Indices (into ``rows``) of the rows whose text contains ``q``, case-insensitively."""
        n = self.rows.num_rows
        if tokens is None:
            return pc.indices_nonzero(pc.match_substring(self.text, q, ignore_case=True)).to_numpy()
        found = []
        for token in tokens:
            ids = _matching_terms(self.terms, token).to_numpy()
            if not len(ids):
                return np.empty(0, np.int64)
            starts = np.where(ids > 0, self.ends[np.maximum(ids - 1, 0)], 0)
            stops = self.ends[ids]
            found.append((int((stops - starts).sum()), ids, starts, stops))
        candidates: np.ndarray | None = None
        # the rarest first; once few rows are left, the check below is cheaper than narrowing more
        for _, ids, starts, stops in sorted(found, key=lambda f: f[0]):
            if candidates is not None and candidates.sum() <= FEW:
                break
            if len(ids) <= MANY_TERMS:
                rows = np.concatenate([self.postings[a:b] for a, b in zip(starts, stops, strict=True)])
            else:
                wanted = np.zeros(len(self.ends), dtype=bool)
                wanted[ids] = True
                rows = self.postings[np.repeat(wanted, np.diff(self.ends, prepend=0))]
            mask = np.zeros(n, dtype=bool)
            mask[rows] = True
            candidates = mask if candidates is None else candidates & mask
        index = np.flatnonzero(candidates)
        if not len(index):
            return index
        checked = pc.match_substring(self.text.take(pa.array(index)), q, ignore_case=True)
        return index[np.asarray(checked.to_numpy(zero_copy_only=False), dtype=bool)]

    def hits(self, q: str, tokens: list[Token] | None) -> pa.Table:
        """:data:`HITS` rows of the rows whose text contains ``q``, and their ``row`` here."""
        rows = self.matching_rows(q, tokens)
        found = self.rows.select(["episode_id", "seq", "field"]).take(pa.array(rows, pa.int64()))
        return found.append_column("row", pa.array(rows, pa.int32()))


def _array(column: pa.ChunkedArray) -> pa.Array:
    """One array of a column read from an entry: its one batch, not a copy (``combine_chunks`` copies).

    (A table of no batches, which an empty file writes, gives a chunked array of no chunks, which
    some kernels do not take: an empty array then.)
    """
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _read(path: Path) -> pa.Table:
    # (not closed here: the table's buffers are the mapping, which lives as long as they do)
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


FILES = ("rows.arrow", "terms.arrow", "postings.arrow")
"""An entry's files (and ``manifest.json``: each one's CRC32C, written last)."""


def _checksum(path: Path) -> str:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = crc32c.crc32c(chunk, crc)
    return f"{crc:08x}"


def _write(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def searched_rows(table: pa.Table) -> pa.Table:
    """The rows of a ``steps`` fragment whose text is searched, as :data:`ROWS`."""
    kinds = pa.array(list(STEP_FIELDS), pa.string())
    names = pa.array(list(STEP_FIELDS.values()), pa.string())
    table = pa.table(
        {  # (string views, as delta-rs may read them, cast to what the kernels take)
            "episode_id": table["episode_id"].cast(pa.string()),
            "seq": table["seq"].cast(pa.int64()),
            "type": table["type"].cast(pa.string()),
            "text": table["text"].cast(pa.large_string()),
        }
    )
    kind = pc.index_in(table["type"], value_set=kinds)
    keep = pc.and_(pc.is_valid(kind), pc.is_valid(table["text"]))
    table, kind = table.filter(keep), pc.filter(kind, keep)
    return pa.Table.from_arrays(
        [
            table["episode_id"].combine_chunks().dictionary_encode(),
            table["seq"],
            pc.take(names, kind).dictionary_encode().cast(ROWS.field("field").type),
            table["text"],
        ],
        schema=ROWS,
    ).combine_chunks()


def build_entry(fragment: Any, directory: Path) -> Path:
    """Index one Parquet fragment of ``steps`` into ``directory`` (written aside, then renamed in)."""
    rows = searched_rows(fragment.to_table(columns=["episode_id", "seq", "type", "text"]))
    terms, ends, postings = postings_of(rows["text"].combine_chunks())
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.parent / f".building-{uuid.uuid4().hex}"
    staging.mkdir()
    try:
        _write(staging / "rows.arrow", rows)
        _write(staging / "terms.arrow", pa.table([terms, pa.array(ends, pa.int64())], schema=TERMS))
        _write(staging / "postings.arrow", pa.table([pa.array(postings, pa.uint32())], schema=POSTINGS))
        # written last: an entry is whole when its manifest is there and every file matches it
        manifest = {name: _checksum(staging / name) for name in FILES}
        (staging / "manifest.json").write_text(json.dumps(manifest))
        for name in (*FILES, "manifest.json"):
            with open(staging / name, "rb") as f:
                os.fsync(f.fileno())
        try:
            staging.rename(directory)
        except OSError:  # built meanwhile by another process: theirs serves
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


def scan_hits(fragment: Any, q: str) -> pa.Table:
    """A fragment not indexed yet: the match pushed into its scan."""
    columns = ["episode_id", "seq", "type"]
    try:
        match = pc.match_substring(pc.field("text"), q, ignore_case=True)
        found = fragment.to_table(columns=columns, filter=match)
        rows = searched_rows(found.append_column("text", pa.array([""] * found.num_rows, pa.string())))
    except pa.ArrowNotImplementedError:  # (text as string views: read, cast, then matched)
        rows = searched_rows(fragment.to_table(columns=[*columns, "text"]))
        rows = rows.filter(pc.match_substring(rows["text"], q, ignore_case=True))
    return rows.select(["episode_id", "seq", "field"])


# --------------------------------------------------------------------------- the index


class TextIndex:
    """The per-file entries under ``root``, a builder thread that fills them, and the queries.

    Args:
        root: the directory entries live in (one per data file; ``FORMAT`` in their path).
        entries: most entries kept open (memory-mapped: the page cache holds their bytes).
        threads: fragments searched at once.
        build: whether missing entries are built in the background (else only scanned).
    """

    def __init__(
        self, root: Path, *, entries: int = 4096, threads: int | None = None, build: bool = True
    ) -> None:
        self.root = Path(root) / f"v{FORMAT}"
        self._open: OrderedDict[str, Entry] = OrderedDict()
        self._capacity = entries
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads or min(4, os.cpu_count() or 1),
                                        thread_name_prefix="text-index")  # fmt: skip
        self._build = build
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._queued: set[str] = set()
        self._builder: threading.Thread | None = None
        self.built = 0
        self.failed: dict[str, str] = {}
        self._fragments: OrderedDict[Any, list[Any]] = OrderedDict()

    def fragments(self, key: Any, make: Any) -> list[Any]:
        """The data files of one table version (``make()`` lists them; the newest few are kept).

        Listing them costs tens of milliseconds at a hundred files (delta-rs builds each file's
        statistics into an expression), every search.
        """
        with self._lock:
            found = self._fragments.get(key)
            if found is not None:
                self._fragments.move_to_end(key)
                return found
        made = list(make())
        with self._lock:
            self._fragments[key] = made
            while len(self._fragments) > 8:
                self._fragments.popitem(last=False)
        return made

    @staticmethod
    def key(fragment: Any) -> str:
        """An entry's name: the data file's (Delta's names hold a UUID, and a data file never changes)."""
        return os.path.basename(fragment.path)

    def entry(self, key: str) -> Entry | None:
        """The entry of a data file, opened (None: not built, or damaged and removed)."""
        with self._lock:
            found = self._open.get(key)
            if found is not None:
                self._open.move_to_end(key)
                return found
        path = self.root / key
        if not (path / "manifest.json").exists():
            return None
        try:
            # checked against its manifest before it is mapped: a damaged file read through a
            # memory map can kill the process, not raise
            manifest = json.loads((path / "manifest.json").read_text())
            bad = [n for n in FILES if manifest.get(n) != _checksum(path / n)]
            if bad:
                raise ValueError(f"{', '.join(bad)} do not match the manifest")
            opened = Entry(path)
            os.utime(path)  # (used: prune keeps what searches open)
        except Exception as exc:  # noqa: BLE001 - any damage: the entry is dropped and rebuilt
            log.warning("text index entry %s cannot be read (%s): rebuilding it", path, exc)
            shutil.rmtree(path, ignore_errors=True)
            return None
        with self._lock:
            self._open[key] = opened
            while len(self._open) > self._capacity:
                self._open.popitem(last=False)
        return opened

    def missing(self, fragments: Iterable[Any]) -> list[Any]:
        """The fragments without an entry."""
        return [f for f in fragments if self.entry(self.key(f)) is None]

    def request(self, fragments: Iterable[Any]) -> None:
        """Queue the fragments that have no entry for the builder thread."""
        if not self._build:
            return
        with self._lock:
            for fragment in fragments:
                key = self.key(fragment)
                if key not in self._queued and key not in self.failed:
                    self._queued.add(key)
                    self._queue.put((key, fragment))
            if self._queued and (self._builder is None or not self._builder.is_alive()):
                self._builder = threading.Thread(target=self._run, name="text-index-builder", daemon=True)
                self._builder.start()

    def _run(self) -> None:
        while True:
            try:
                key, fragment = self._queue.get(timeout=1.0)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._builder = None
                        return
                continue
            try:
                if not (self.root / key).exists():
                    build_entry(fragment, self.root / key)
                    self.built += 1
            except Exception as exc:  # noqa: BLE001 - a file that cannot be indexed is scanned
                log.warning("text index: %s not indexed (%s); it is scanned instead", key, exc)
                self.failed[key] = str(exc)
            finally:
                with self._lock:
                    self._queued.discard(key)

    def build_now(self, fragments: Sequence[Any], progress: Any = None) -> int:
        """Build every missing entry in this thread (``trajlake api index``); how many were built."""
        todo = self.missing(fragments)
        for i, fragment in enumerate(todo):
            build_entry(fragment, self.root / self.key(fragment))
            if progress is not None:
                progress(i + 1, len(todo))
        return len(todo)

    def wait(self, timeout: float = 600.0) -> bool:
        """Wait for the builder to empty its queue (tests, the benchmark)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._queued:
                    return True
            time.sleep(0.05)
        return False

    def hits(self, fragments: Sequence[Any], q: str) -> pa.Table:
        """Every searched step of ``fragments`` whose text contains ``q`` (:data:`LOCATED` rows)."""
        tokens = plan(q)
        todo: list[Any] = []

        def one(at: int) -> pa.Table:
            fragment = fragments[at]
            entry = self.entry(self.key(fragment))
            if entry is None:
                todo.append(fragment)
                found = scan_hits(fragment, q)
                return found.append_column("row", pa.nulls(found.num_rows, pa.int32()))
            return entry.hits(q, tokens)

        parts = list(self._pool.map(one, range(len(fragments))))
        if todo:
            self.request(todo)
        if not parts:
            return LOCATED.empty_table()
        located = [
            p.add_column(3, "file", pa.repeat(pa.scalar(i, pa.int32()), p.num_rows)).cast(LOCATED)
            for i, p in enumerate(parts)
        ]
        return pa.concat_tables(located).combine_chunks()

    def texts(self, fragments: Sequence[Any], files: Sequence[int], rows: Sequence[int]) -> list[str | None]:
        """The texts at (file, row) places :meth:`hits` answered (None: that entry is gone meanwhile)."""
        out: list[str | None] = [None] * len(files)
        by_file: dict[int, list[int]] = {}
        for i, f in enumerate(files):
            by_file.setdefault(f, []).append(i)
        for f, places in by_file.items():
            entry = self.entry(self.key(fragments[f])) if 0 <= f < len(fragments) else None
            if entry is None:
                continue
            taken = entry.text.take(pa.array([rows[i] for i in places], pa.int64())).to_pylist()
            for i, text in zip(places, taken, strict=True):
                out[i] = text
        return out

    def prune(self, keep: Iterable[str], older_than_s: float = 3600.0) -> int:
        """Remove entries of files no longer in the table (not ``keep``), untouched for ``older_than_s``."""
        if not self.root.exists():
            return 0
        keep = set(keep)
        removed = 0
        now = time.time()
        for path in self.root.iterdir():
            if path.name in keep:
                continue
            with contextlib.suppress(OSError):  # (a build may rename its staging folder meanwhile)
                age = now - path.stat().st_mtime
                if age >= (3600 if path.name.startswith(".building-") else older_than_s):
                    shutil.rmtree(path)
                    with self._lock:
                        self._open.pop(path.name, None)
                    removed += 1
        return removed
