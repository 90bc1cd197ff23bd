"""The ``steps`` text index (api/text_index.py): it finds exactly what the scan finds.

The property test writes real Parquet files of texts drawn from an alphabet chosen to break a
careless index (both cases, separators, digits, the Kelvin sign and the long s that RE2 folds
into ASCII letters, the dotted capital I that lower-casing makes ASCII, Greek sigmas, accents),
and asks queries that are cut from those texts with their case changed, or made up. Each answer
of an index entry is compared with ``match_substring(ignore_case=True)`` over the same texts,
the match the scan uses.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.text_index import Entry, TextIndex, build_entry, plan, terms_of

ALPHABET = "abcKkSsxyz09_ .,:/-\n()\u212a\u017f\u0130i\u03c3\u03c2\u03a3\u00e9\u00c9"


def fragment(path: Path, texts: list[str | None], types: list[str] | None = None) -> Any:
    n = len(texts)
    table = pa.table({
        "episode_id": [f"ep-{i % 3}" for i in range(n)],
        "seq": list(range(n)),
        "type": types or ["tool_result"] * n,
        "text": pa.array(texts, pa.string()),
    })  # fmt: skip
    pq.write_table(table, path)
    return next(iter(ds.dataset(path).get_fragments()))


def flip(text: str, mask: list[bool]) -> str:
    return "".join(c.swapcase() if m else c for c, m in zip(text, mask, strict=False)) + text[len(mask) :]


@st.composite
def case(draw: Any) -> tuple[list[str | None], list[str]]:
    texts = draw(st.lists(st.one_of(st.none(), st.text(ALPHABET, max_size=40)), min_size=1, max_size=12))
    queries = []
    for _ in range(4):
        source = draw(st.sampled_from([t for t in texts if t] or ["x"]))
        start = draw(st.integers(0, len(source)))
        end = draw(st.integers(start, len(source)))
        cut = source[start:end] or "k"
        queries.append(flip(cut, draw(st.lists(st.booleans(), max_size=len(cut)))))
    queries += draw(st.lists(st.text(ALPHABET, min_size=1, max_size=6), min_size=1, max_size=3))
    return texts, queries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=case())
def test_an_entry_finds_exactly_the_rows_the_scan_finds(tmp_path: Path, drawn: Any) -> None:
    texts, queries = drawn
    shutil.rmtree(tmp_path / "ix", ignore_errors=True)
    entry = Entry(build_entry(fragment(tmp_path / "f.parquet", texts), tmp_path / "ix"))
    kept = [t for t in texts if t is not None]
    assert entry.text.to_pylist() == kept
    for q in queries:
        truth = np.flatnonzero(pc.match_substring(pa.array(kept, pa.string()), q, ignore_case=True).to_numpy(
            zero_copy_only=False))  # fmt: skip
        assert entry.matching_rows(q, plan(q)).tolist() == truth.tolist(), (q, kept)


def test_terms_are_cut_at_ascii_separators_and_never_across_rows() -> None:
    terms, rows = terms_of(pa.array(["Foo.bar_1 BAZ", "qux", "", "end\u00e9-x", "a(b"]))
    assert list(zip(terms.to_pylist(), rows.tolist(), strict=True)) == [
        ("foo", 0), ("bar_1", 0), ("baz", 0), ("qux", 1), ("end\u00e9", 3), ("x", 3), ("a", 4), ("b", 4)
    ]  # fmt: skip
    # a query's tokens, and how each must occur in a term
    assert [(t.text, t.kind) for t in plan("5 passed in") or []] == [
        ("passed", "equal"), ("in", "starts"), ("5", "ends")
    ]  # fmt: skip
    assert [(t.text, t.kind) for t in plan(" Flaky") or []] == [("flaky", "starts")]
    assert plan("()") is None and plan("caf\u00e9") is None  # no token; not ASCII: the text is matched


def test_only_searched_step_types_with_text_are_indexed(tmp_path: Path) -> None:
    frag = fragment(tmp_path / "f.parquet", ["a match", "a match", None, "a match", "a match"],
                    ["model_call", "sandbox", "tool_result", "tool_call", "annotation"])  # fmt: skip
    index = TextIndex(tmp_path / "ix", build=False)
    hits = index.hits([frag], "MATCH")  # not indexed: scanned (no place in an entry)
    assert hits.select(["episode_id", "seq", "field"]).to_pylist() == [
        {"episode_id": "ep-0", "seq": 0, "field": "completion"},
        {"episode_id": "ep-0", "seq": 3, "field": "tool_call"},
        {"episode_id": "ep-1", "seq": 4, "field": "annotation"},
    ]
    assert hits["file"].to_pylist() == [0, 0, 0] and hits["row"].null_count == 3
    assert index.build_now([frag]) == 1 and index.build_now([frag]) == 0
    assert index.entry(index.key(frag)) is not None
    found = index.hits([frag], "MATCH")
    assert found.select(["episode_id", "seq", "field"]).to_pylist() == hits.select(
        ["episode_id", "seq", "field"]
    ).to_pylist()
    # where each is in the entry, and its text read back from there (the snippets of a page)
    assert found["row"].to_pylist() == [0, 1, 2]  # (an entry holds the searched rows only)
    assert index.texts([frag], found["file"].to_pylist(), found["row"].to_pylist()) == ["a match"] * 3


def test_a_damaged_entry_is_dropped_and_built_again(tmp_path: Path) -> None:
    frag = fragment(tmp_path / "f.parquet", ["one two", "three"])
    index = TextIndex(tmp_path / "ix")
    index.request([frag])
    assert index.wait(60) and index.built == 1
    path = index.root / index.key(frag)
    (path / "postings.arrow").write_bytes(b"not arrow")
    fresh = TextIndex(tmp_path / "ix")
    assert fresh.entry(fresh.key(frag)) is None and not path.exists()
    assert fresh.hits([frag], "three").num_rows == 1  # scanned meanwhile, and queued
    assert fresh.wait(60) and fresh.entry(fresh.key(frag)) is not None
    # one byte changed inside a file, which read through its memory map could crash the process:
    # the manifest's checksum finds it before the file is mapped
    rows = path / "rows.arrow"
    data = bytearray(rows.read_bytes())
    data[len(data) // 2] ^= 0x5A
    rows.write_bytes(bytes(data))
    again = TextIndex(tmp_path / "ix", build=False)
    assert again.entry(again.key(frag)) is None and not path.exists()
    # an entry without its manifest (a build that died before writing it) is not an entry
    assert again.build_now([frag]) == 1
    (path / "manifest.json").unlink()
    assert again.entry(again.key(frag)) is None


def test_postings_cut_in_chunks_equal_postings_made_at_once(monkeypatch: Any) -> None:
    import random

    import api.text_index as text_index

    rng = random.Random(1)
    words = ["alpha", "Beta", "gamma_1", "d\u00e9j\u00e0", "x", "", "\u017ftop", "K9"]
    texts = [
        None if rng.random() < 0.05 else " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        for _ in range(3000)
    ]
    at_once = text_index.postings_of(pa.array(texts, pa.string()))
    for chunk in (1, 100, 7777):  # (bytes: a chunk is at least one row)
        monkeypatch.setattr(text_index, "CHUNK_BYTES", chunk)
        terms, ends, rows = text_index.postings_of(pa.array(texts, pa.string()))
        assert terms.to_pylist() == at_once[0].to_pylist()
        assert ends.tolist() == at_once[1].tolist() and rows.tolist() == at_once[2].tolist()
