"""``/search`` and ``/quarantine`` over real lakes folded by the real pipeline from the session broker.

The story lake (tests/api/conftest.py) has the episodes; a second lake, folded from a topic of
this module's own, has records the pipeline quarantined (in two batches, so two Delta versions)
and an imported episode whose instruction is in ``episode_started``'s metadata.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from fastapi.testclient import TestClient

from api import create_app
from api.routes.search import episode_corpus, snippet
from api.text_index import TextIndex
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from pipelines import PipelineConfig, run_once
from schemas import new_id
from schemas.tables import EPISODES, TASKS
from tests.api.conftest import StoryLake
from tests.pipelines.factories import ev
from tests.pipelines.log_workload import produce

pytestmark = pytest.mark.kafka

INSTRUCTION = "Reverse the order of the words in input.txt and print them"


def get(client: TestClient, path: str, expect: int = 200, **params: Any) -> Any:
    r = client.get(path, params=params)
    assert r.status_code == expect, r.text
    return r.json()


def story_ids(story_lake: StoryLake, body: dict[str, Any]) -> list[str]:
    """The story's episodes among the results, by name, in the order answered.

    (Every module's story lake folds the stories of the modules before it too: the conftest's
    topic is per process; the names keep these assertions exact whatever else the lake holds.)
    """
    by_id = {e.id: n for n, e in story_lake.story.episodes.items()}
    return [by_id[i["episode"]["episode_id"]] for i in body["items"] if i["episode"]["episode_id"] in by_id]


def every_page(client: TestClient, q: str, limit: int) -> list[dict[str, Any]]:
    items, offset = [], 0
    while True:
        page = get(client, "/search", q=q, limit=limit, offset=offset)
        items += page["items"]
        offset += limit
        if offset >= page["total"]:
            return items


def test_search_finds_tool_outputs_case_insensitively_with_a_snippet_per_hit(
    client: TestClient, story_lake: StoryLake
) -> None:
    body = get(client, "/search", q="filenotfounderror", limit=500)
    assert story_ids(story_lake, body) == ["e11"]
    hit = next(i for i in body["items"] if i["episode"]["episode_id"] == story_lake.story.id("e11"))
    assert hit["hit_count"] == 1 and len(hit["hits"]) == 1
    h = hit["hits"][0]
    assert (h["seq"], h["field"]) == (3, "tool_output")
    assert h["snippet"][h["match_start"] : h["match_end"]] == "FileNotFoundError"
    assert h["snippet"] == (
        "\n[stderr]\nTraceback (most recent call last):\nFileNotFoundError: [Errno 2] No such file: '/w/x.py'"
    )
    # the episode comes whole: the policy and its version are separate fields
    assert hit["episode"]["policy_id"] == "pol" and hit["episode"]["policy_version"] == "2"
    assert body["total"] == len(body["items"]) and body["hits"] == body["total"]
    assert set(body["versions"]) == {"episodes", "steps", "tasks"}
    assert body["versions"]["steps"] == story_lake.after_batch2["steps"]
    # a literal match: brackets and dots are text, not a pattern
    assert story_ids(story_lake, get(client, "/search", q="[Errno 2]")) == ["e11"]
    assert get(client, "/search", q=".*")["total"] == 0


def test_search_matches_task_ids_completions_and_tool_calls_newest_first(
    client: TestClient, story_lake: StoryLake
) -> None:
    tasks = get(client, "/search", q="PYFIX-2", limit=500)
    assert story_ids(story_lake, tasks) == ["e12", "e11", "e6", "e3"]  # newest first
    assert {(h["seq"], h["field"]) for i in tasks["items"] for h in i["hits"]} == {(None, "task_id")}
    # the open e10's only model call is found too; e4's completion is the long "think ..." one
    completions = get(client, "/search", q="let me RUN the tests", limit=500)
    assert story_ids(story_lake, completions) == [f"e{i}" for i in (12, 11, 10, 9, 8, 7, 6, 5, 3, 2, 1)]
    assert {(h["seq"], h["field"]) for i in completions["items"] for h in i["hits"]} == {(1, "completion")}
    # every tool call ran `pytest -q`: e6 crashed and e10 is open before any
    calls = every_page(client, "pytest", limit=3)
    assert story_ids(story_lake, {"items": calls}) == [f"e{i}" for i in (12, 11, 9, 8, 7, 5, 4, 3, 2, 1)]
    assert (
        len({i["episode"]["episode_id"] for i in calls})
        == len(calls)
        == get(client, "/search", q="pytest")["total"]
    )


def test_search_counts_every_hit_and_returns_at_most_max_hits_snippets(
    client: TestClient, story_lake: StoryLake
) -> None:
    # e2: its completion ("...the tests"), its tool call ("pytest -q") and its output ("FAILED test_add")
    body = get(client, "/search", q="TEST", max_hits=2, limit=500)
    e2 = next(i for i in body["items"] if i["episode"]["episode_id"] == story_lake.story.id("e2"))
    assert e2["hit_count"] == 3
    assert [(h["seq"], h["field"]) for h in e2["hits"]] == [(1, "completion"), (2, "tool_call")]
    assert [h["snippet"][h["match_start"] : h["match_end"]] for h in e2["hits"]] == ["test", "test"]
    assert body["hits"] == sum(i["hit_count"] for i in body["items"])
    every = get(client, "/search", q="TEST", max_hits=5, limit=500)
    e2 = next(i for i in every["items"] if i["episode"]["episode_id"] == story_lake.story.id("e2"))
    assert [(h["seq"], h["field"]) for h in e2["hits"]] == [
        (1, "completion"),
        (2, "tool_call"),
        (3, "tool_output"),
    ]


def test_search_pins_versions_and_refuses_bad_input(client: TestClient, story_lake: StoryLake) -> None:
    # e12 came with the second batch: not in the first versions of episodes and steps
    first = story_lake.after_batch1
    early = get(client, "/search", q="assert 1 == 2", version=first["episodes"], steps_version=first["steps"])
    assert story_ids(story_lake, early) == [] and early["versions"]["steps"] == first["steps"]
    assert story_ids(story_lake, get(client, "/search", q="assert 1 == 2")) == ["e12"]
    assert get(client, "/search", 422)["detail"] == "q: Field required"
    assert get(client, "/search", 422, q="")["detail"] == "q: String should have at least 1 character"
    assert get(client, "/search", 422, q="x", max_hits=0)["error"] == "invalid_request"
    assert get(client, "/search", 422, q="x", query="y")["detail"].startswith(
        "unknown query parameter query: /search takes cursor, limit, max_hits, offset, q, steps_version, "
        "version"
    )
    assert get(client, "/search", 404, q="x", steps_version=99)["error"] == "version_not_found"


def test_search_snippets_cut_long_texts_around_the_match() -> None:
    text = "a" * 500 + "NEEDLE" + "b" * 500
    cut, start, end = snippet(text, "needle")
    assert cut[start:end] == "NEEDLE" and cut.startswith("\u2026a") and cut.endswith("b\u2026")
    assert len(cut) == 1 + 60 + 6 + 140 + 1
    assert snippet("needle at the start", "NEEDLE") == ("needle at the start", 0, 6)


def test_the_instruction_of_a_task_spec_is_searched_through_the_tasks_table() -> None:
    def row(schema: pa.Schema, **values: Any) -> dict[str, Any]:
        return {f.name: values.get(f.name) for f in schema}

    episodes = pa.Table.from_pylist(
        [
            row(
                EPISODES,
                episode_id="a",
                task_id="rev-1",
                task_version="2",
                task_family="rev",
                completeness="x",
            ),
            row(
                EPISODES,
                episode_id="b",
                task_id="rev-1",
                task_version="1",
                task_family="rev",
                completeness="x",
            ),
        ],
        schema=EPISODES,
    )
    spec = {"id": "rev-1", "instruction": INSTRUCTION}
    tasks = pa.Table.from_pylist(
        [row(TASKS, task_id="rev-1", version="2", family="rev", spec=json.dumps(spec))], schema=TASKS
    )
    corpus = episode_corpus(episodes, tasks)
    found = corpus.filter(pc.equal(corpus["field"], "instruction")).to_pylist()
    assert found == [{"episode_id": "a", "seq": None, "field": "instruction", "text": INSTRUCTION}]


# ------------------------------------------------------------------ a lake with quarantined records


def imported_episode() -> list[dict[str, Any]]:
    """An imported episode: the instruction in episode_started's metadata, an unmapped message kept."""
    eid = new_id()
    started = {
        "task": {"id": "rev-1", "family": "imported"},
        "policy": {"id": "mini-swe-agent", "version": "gpt-x"},
        "metadata": {"instruction": INSTRUCTION, "source": "import"},
    }
    return [
        ev(eid, 0, "episode_started", started),
        ev(eid, 1, "annotation", {"key": "unmapped", "value": {"role": "user", "content": "format error"}}),
        ev(eid, 2, "episode_ended", {"status": "failure"}),
    ]


BATCH1 = [b"{not json", json.dumps({"type": "model_call", "seq": -1}).encode(), b"\xff\xfe bytes"]
BATCH2 = [json.dumps({"event_id": "x"}).encode()]


@pytest.fixture(scope="module")
def quarantine_lake(kafka: EmbeddedKafka, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    topic = f"api.quarantine.{os.getpid()}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 1}).ensure_topics()
    root = tmp_path_factory.mktemp("quarantine-lake") / "lake"
    cfg = PipelineConfig(
        bootstrap=kafka.bootstrap,
        lake_root=str(root),
        topics=(topic,),
        control_topics={},
        worker_log=str(root.parent / "workers.log"),
    )
    imported = [(topic, d["episode_id"].encode(), json.dumps(d).encode()) for d in imported_episode()]
    versions = []
    for i, batch in enumerate((BATCH1, BATCH2)):
        produce(
            kafka.bootstrap, [(topic, f"k{i}-{j}".encode(), raw) for j, raw in enumerate(batch)] + imported
        )
        imported = []
        assert len(run_once(cfg)) == 1
        versions.append(Lake(root).versions()["quarantine"])
    return root, versions


def test_quarantine_lists_each_record_with_its_reason_newest_first(
    quarantine_lake: tuple[Path, list[int]],
) -> None:
    root, (v1, v2) = quarantine_lake
    with TestClient(create_app(root)) as c:
        body = get(c, "/quarantine")
        assert body["versions"] == {"quarantine": v2} and body["total"] == 4
        assert (body["limit"], body["offset"]) == (50, 0)
        newest, *older = body["items"]
        assert (newest["key"], newest["raw"], newest["offset"]) == ("k1-0", '{"event_id": "x"}', 6)
        assert newest["error"] and newest["error_fields"]
        assert [r["key"] for r in older] == ["k0-2", "k0-1", "k0-0"]  # one partition: last offset first
        by_key = {r["key"]: r for r in body["items"]}
        assert by_key["k0-0"]["error"].startswith("not UTF-8 JSON") and by_key["k0-0"]["error_fields"] == [
            "<root>"
        ]
        assert (
            by_key["k0-2"]["error"].startswith("not UTF-8 JSON")
            and by_key["k0-2"]["raw"] == "\ufffd\ufffd bytes"
        )
        assert by_key["k0-2"]["raw_bytes"] == 8
        assert "seq" in by_key["k0-1"]["error"] or "seq" in by_key["k0-1"]["error_fields"]
        assert all(r["topic"].startswith("api.quarantine.") and r["partition"] == 0 for r in body["items"])
        # paged, cut, and read at an earlier version
        assert [r["key"] for r in get(c, "/quarantine", limit=2, offset=1)["items"]] == ["k0-2", "k0-1"]
        cut = get(c, "/quarantine", max_text=3)["items"][0]
        assert (cut["raw"], cut["raw_truncated"], cut["raw_bytes"]) == ('{"e', True, 17)
        early = get(c, "/quarantine", version=v1)
        assert early["versions"] == {"quarantine": v1} and [r["key"] for r in early["items"]] == [
            "k0-2",
            "k0-1",
            "k0-0",
        ]
        assert get(c, "/quarantine", 404, version=v2 + 1)["detail"] == (
            f"table quarantine has no version {v2 + 1}: its latest version is {v2}"
        )
        assert get(c, "/quarantine", 422, limit=0)["error"] == "invalid_request"
        assert get(c, "/quarantine", 422, reason="x")["detail"] == (
            "unknown query parameter reason: /quarantine takes cursor, limit, max_text, offset, version"
        )
        # the imported episode's instruction is searched (from episode_started's metadata)
        found = get(c, "/search", q="reverse the ORDER")
        assert found["total"] == 1 and found["items"][0]["episode"]["task_id"] == "rev-1"
        assert [(h["seq"], h["field"]) for h in found["items"][0]["hits"]] == [(None, "instruction")]
        assert [i["episode"]["task_id"] for i in get(c, "/search", q="FORMAT ERROR")["items"]] == ["rev-1"]


def test_the_story_lake_has_nothing_in_quarantine(client: TestClient, story_lake: StoryLake) -> None:
    assert get(client, "/quarantine") == {
        "versions": {"quarantine": story_lake.after_batch2["quarantine"]},
        "total": 0,
        "limit": 50,
        "offset": 0,
        "next_cursor": None,
        "items": [],
    }


def test_a_token_guards_search_and_quarantine(story_lake: StoryLake) -> None:
    with TestClient(create_app(story_lake.root, token="s3cret", reviewers={"ann": "r3viewer"})) as c:
        for path, params in (("/search", {"q": "pytest"}), ("/quarantine", {})):
            assert c.get(path, params=params).status_code == 401
            wrong = c.get(path, params=params, headers={"Authorization": "Bearer wrong"})
            assert (
                wrong.status_code == 401
                and wrong.json()["detail"] == "the bearer token is not valid for this API"
            )
            for token in ("s3cret", "r3viewer"):  # a reviewer reads what they review
                assert (
                    c.get(path, params=params, headers={"Authorization": f"Bearer {token}"}).status_code
                    == 200
                )


def test_search_with_the_text_index_answers_as_the_scan(
    client: TestClient, story_lake: StoryLake, tmp_path: Path
) -> None:
    """The index (api/text_index.py) changes how steps are found, never what is found."""
    queries = ["filenotfounderror", "[Errno 2]", "let me RUN the tests", "TEST", "pytest -q", "e", "x.py'",
               ".*", "PYFIX-2", "caf\u00e9", "no such"]  # fmt: skip
    batch1 = story_lake.after_batch1
    first = {"steps_version": batch1["steps"], "version": batch1["episodes"]}
    app = create_app(story_lake.root, search_index=tmp_path / "index")
    index = app.state.reader.text_index
    with TestClient(app) as indexed:
        for rounds in range(2):  # scanned (the files queued), then answered from the built entries
            for q in queries:
                for pinned in ({}, first):
                    assert get(indexed, "/search", q=q, limit=500, **pinned) == get(
                        client, "/search", q=q, limit=500, **pinned
                    ), (q, pinned, rounds)
            assert index.wait(120)
            entries = sorted(p.name for p in index.root.iterdir())
            assert entries and not index.failed
    steps = Lake(story_lake.root).table("steps").to_pyarrow_dataset()
    files = {Path(f.path).name for f in steps.get_fragments()}
    assert files <= set(entries)  # every data file of the newest version has its entry


def test_api_index_builds_every_entry_once(story_lake: StoryLake, tmp_path: Path) -> None:
    from tests.trajlake.test_cli_errors import NOT_READY, cli

    where = tmp_path / "index"
    code, out = cli(tmp_path, "api", "index", "--lake", str(story_lake.root), "--search-index", str(where))
    steps = Lake(story_lake.root).table("steps").to_pyarrow_dataset()
    files = {Path(f.path).name for f in steps.get_fragments()}
    assert code == 0 and f"{len(files)} data files indexed, 0 already were" in " ".join(out.split()), out
    assert {p.name for p in TextIndex(where).root.iterdir()} == files
    code, out = cli(tmp_path, "api", "index", "--lake", str(story_lake.root), "--search-index", str(where))
    assert code == 0 and f"0 data files indexed, {len(files)} already were" in " ".join(out.split()), out
    code, out = cli(tmp_path, "api", "index", "--lake", str(tmp_path / "none"))
    assert code == NOT_READY and "fold the log into it first" in out, out
