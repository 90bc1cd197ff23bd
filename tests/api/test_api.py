"""The query API over a real lake: events produced to the real broker, folded by the real pipeline."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from api import create_app
from lake import Lake
from tests.api.conftest import StoryLake

pytestmark = pytest.mark.kafka

V1_CATEGORIES = [
    ("test_failure", 3),
    ("format_error", 1),
    ("infra_error", 1),
    ("max_steps", 1),
    ("reward_hack_suspected", 1),
    ("timeout", 1),
]


def get(client: TestClient, path: str, expect: int = 200, **params: Any) -> Any:
    r = client.get(path, params=params)
    assert r.status_code == expect, r.text
    return r.json()


def groups(body: dict[str, Any]) -> list[tuple[str | None, int]]:
    return [(g["key"], g["count"]) for g in body["groups"]]


def names(story_lake: StoryLake, ids: list[str]) -> list[str]:
    by_id = {e.id: n for n, e in story_lake.story.episodes.items()}
    return [by_id[i] for i in ids]


def episode_names(story_lake: StoryLake, body: dict[str, Any]) -> list[str]:
    return names(story_lake, [e["episode_id"] for e in body["items"]])


def test_tables_list_every_table_with_its_version_and_rows(client: TestClient, story_lake: StoryLake) -> None:
    tables = {t["name"]: t for t in get(client, "/tables")["tables"]}
    assert set(tables) == {
        "events",
        "quarantine",
        "episodes",
        "steps",
        "rewards",
        "failures",
        "samples",
        "tasks",
        "checkpoints",
        "failure_cases",
        "drift",
        "review_queue",
        "reviews",
        "retractions",
    }
    # every table is a projection of the log: each batch commits all fourteen
    assert {n: t["version"] for n, t in tables.items() if t["exists"]} == story_lake.after_batch2
    assert tables["episodes"]["rows"] == 12
    assert tables["rewards"]["rows"] == 10 + 8  # v1 online (e11 and the open e10 unscored) + v2 re-judge
    assert tables["failures"]["rows"] == 8 + 5 + 1  # v1, v2 and the unjudged e11
    assert tables["quarantine"]["rows"] == 0
    assert tables["tasks"]["exists"] and tables["tasks"]["rows"] == 0 and tables["checkpoints"]["rows"] == 2
    assert get(client, "/health") == {"status": "ok", "tables": 14, "damaged": [], "fix": None}


def test_episodes_are_newest_first_filtered_and_paged(client: TestClient, story_lake: StoryLake) -> None:
    every = [f"e{i}" for i in range(12, 0, -1)]
    pages = [get(client, "/episodes", limit=5, offset=o) for o in (0, 5, 10)]
    assert [p["total"] for p in pages] == [12, 12, 12]
    assert [episode_names(story_lake, p) for p in pages] == [every[:5], every[5:10], every[10:]]
    assert get(client, "/episodes", offset=12)["items"] == []
    assert get(client, "/episodes")["versions"] == {"episodes": story_lake.after_batch2["episodes"]}

    def only(**filters: Any) -> list[str]:
        body = get(client, "/episodes", **filters)
        assert body["total"] == len(body["items"])
        return episode_names(story_lake, body)

    assert only(family="wordplay") == ["e10", "e9", "e8", "e5", "e4"]
    assert only(task_id="pyfix-2") == ["e12", "e11", "e6", "e3"]
    assert only(status="truncated") == ["e5"]
    assert only(status="infra_error") == ["e6"]
    assert only(completeness="open") == ["e10"]
    assert only(policy_version="1") == ["e10", "e8", "e5", "e2", "e1"]
    assert only(family="pyfix", status="failure", policy_version="2") == ["e12", "e11", "e7", "e3"]
    assert only(task_id="no-such-task") == []
    row = get(client, "/episodes", completeness="open")["items"][0]
    assert row["status"] is None and row["ended_at"] is None and row["task_family"] == "wordplay"


def test_episodes_by_verdict_of_a_judge_version(client: TestClient, story_lake: StoryLake) -> None:
    v1_fail = get(client, "/episodes", judge="tests", judge_version="v1", verdict="fail")
    assert (v1_fail["judge"], v1_fail["judge_version"]) == ("tests", "v1")
    assert episode_names(story_lake, v1_fail) == ["e12", "e8", "e7", "e5", "e4", "e3", "e2"]
    assert set(v1_fail["versions"]) == {"episodes", "rewards"}
    assert episode_names(story_lake, get(client, "/episodes", judge_version="v1", verdict="pass")) == [
        "e9",
        "e1",
    ]
    assert episode_names(story_lake, get(client, "/episodes", judge_version="v1", verdict="error")) == ["e6"]
    # The judge defaults to the only one, the version to the latest seen (the re-judge, v2).
    latest = get(client, "/episodes", verdict="fail")
    assert latest["judge_version"] == "v2"
    assert episode_names(story_lake, latest) == ["e8", "e5", "e4", "e3", "e1"]
    # A judge version alone: the episodes it scored.
    assert len(get(client, "/episodes", judge_version="v2")["items"]) == 8
    assert episode_names(story_lake, get(client, "/episodes", verdict="pass", family="pyfix")) == ["e7", "e2"]


def test_episode_detail_has_ordered_steps_all_rewards_and_failures(
    client: TestClient, story_lake: StoryLake
) -> None:
    e2 = story_lake.story.id("e2")
    d = get(client, f"/episodes/{e2}")
    assert d["episode"]["episode_id"] == e2 and d["episode"]["task_id"] == "pyfix-1"
    assert [s["seq"] for s in d["steps"]] == list(range(6)) and d["steps_total"] == 6
    assert [s["type"] for s in d["steps"]] == [
        "episode_started",
        "model_call",
        "tool_call",
        "tool_result",
        "reward",
        "episode_ended",
    ]
    assert d["steps"][3]["exit_code"] == 1 and "AssertionError" in d["steps"][3]["text"]
    assert [(r["judge_version"], r["verdict"], r["source"]) for r in d["rewards"]] == [
        ("v1", "fail", "online"),
        ("v2", "pass", "rejudge"),
    ]
    assert d["rewards"][0]["evidence"]["tests"][0] == {"name": "test_add", "outcome": "failed"}
    assert d["rewards"][1]["rejudge_run_id"] == "rj-1"
    assert [(f["judge_version"], f["category"], f["signature"]) for f in d["failures"]] == [
        ("v1", "test_failure", "test_failure: failed: test_add")
    ]
    assert d["versions"] == {
        t: story_lake.after_batch2[t] for t in ("episodes", "steps", "rewards", "failures")
    }
    # Big text fields are cut, with the full length said; payloads come on request.
    e4 = get(client, f"/episodes/{story_lake.story.id('e4')}", max_text=100, include_payload=True)
    model = e4["steps"][1]
    assert model["type"] == "model_call" and model["text_truncated"] and model["text_length"] == 6000
    assert len(model["text"]) == 100 and model["text"] == ("think " * 20)[:100]
    assert model["payload_truncated"] and len(model["payload"]["completion"]) == 100
    assert e4["steps"][3]["timed_out"] is True and e4["steps"][3]["text_truncated"] is False
    assert get(client, f"/episodes/{e2}", max_steps=2)["steps_total"] == 6
    assert len(get(client, f"/episodes/{e2}", max_steps=2)["steps"]) == 2
    # The unscored episode: one failure under the no-judge "-".
    e11 = get(client, f"/episodes/{story_lake.story.id('e11')}")
    assert e11["rewards"] == []
    assert [(f["judge_name"], f["category"]) for f in e11["failures"]] == [("-", "tool_error")]
    assert e11["failures"][0]["signature"] == "tool_error: FileNotFoundError: [Errno <n>] No such file: <str>"


def test_failure_breakdown_counts_what_was_produced(client: TestClient, story_lake: StoryLake) -> None:
    latest = get(client, "/failures/breakdown")
    assert (latest["judge"], latest["judge_version"], latest["by"]) == ("tests", "v2", "category")
    assert latest["total"] == 5
    assert groups(latest) == [("test_failure", 3), ("max_steps", 1), ("timeout", 1)]
    assert [g["share"] for g in latest["groups"]] == [0.6, 0.2, 0.2]
    assert latest["versions"] == {"failures": 2, "rewards": 2}
    v1 = get(client, "/failures/breakdown", judge="tests", judge_version="v1")
    assert v1["total"] == 8 and groups(v1) == V1_CATEGORIES
    assert sum(g["share"] for g in v1["groups"]) == pytest.approx(1.0)
    by_task = get(client, "/failures/breakdown", judge_version="v1", by="task")
    assert groups(by_task) == [("pyfix-2", 3), ("pyfix-1", 2), ("wp-1", 2), ("wp-2", 1)]
    by_family = get(client, "/failures/breakdown", judge_version="v1", by="family")
    assert groups(by_family) == [("pyfix", 5), ("wordplay", 3)]
    assert by_family["versions"] == {"failures": 2, "rewards": 2, "episodes": 2}
    by_policy = get(client, "/failures/breakdown", judge_version="v1", by="policy_version")
    assert groups(by_policy) == [("2", 5), ("1", 3)]
    unjudged = get(client, "/failures/breakdown", judge="-")
    assert (unjudged["judge_version"], groups(unjudged)) == ("-", [("tool_error", 1)])

    # category x family: the counts per pair, and the filters
    cross = get(client, "/failures/breakdown", by="category", then="family")
    cells = [(c["key"], c["then"], c["count"]) for c in cross["cells"]]
    assert cells == [("test_failure", "pyfix", 2), ("max_steps", "wordplay", 1),
                     ("test_failure", "wordplay", 1), ("timeout", "wordplay", 1)]  # fmt: skip
    assert groups(cross) == groups(latest) and cross["versions"]["episodes"] == 2
    v1_cross = get(client, "/failures/breakdown", judge_version="v1", by="family", then="category")
    for family, n in groups(by_family):  # every family's cells add up to its count
        assert sum(c["count"] for c in v1_cross["cells"] if c["key"] == family) == n
    pyfix = get(client, "/failures/breakdown", judge_version="v1", family="pyfix")
    assert pyfix["total"] == 5 and pyfix["filters"] == {"family": "pyfix"}
    assert groups(pyfix) == sorted(
        [(c["then"], c["count"]) for c in v1_cross["cells"] if c["key"] == "pyfix"],
        key=lambda kc: (-kc[1], kc[0]),
    )
    assert sum(g["share"] for g in pyfix["groups"]) == pytest.approx(1.0)
    narrow = get(client, "/failures/breakdown", judge_version="v1", family="pyfix", policy_version="2",
                 category="test_failure", by="task")  # fmt: skip
    assert narrow["total"] == sum(n for _, n in groups(narrow)) and narrow["total"] <= 3
    assert get(client, "/failures/breakdown", family="no-such-family")["groups"] == []
    assert get(client, "/failures/breakdown", 422, by="family", then="family")["detail"] == (
        "then: give a key other than by (family), or leave it out"
    )


def test_failure_clusters_group_by_error_signature(client: TestClient, story_lake: StoryLake) -> None:
    body = get(client, "/failures/clusters", judge_version="v1")
    assert (body["total_failures"], body["total_clusters"]) == (8, 6)
    top = body["clusters"][0]
    assert top["signature"] == "test_failure: failed: test_add"
    assert (top["category"], top["count"], top["share"]) == ("test_failure", 3, 0.375)
    assert [(t["task_id"], t["count"]) for t in top["tasks"]] == [("pyfix-2", 2), ("pyfix-1", 1)]
    assert names(story_lake, top["example_episode_ids"]) == ["e2", "e3", "e12"]
    assert top["example_message"] == "failed: test_add"
    singles = {c["signature"]: c["category"] for c in body["clusters"][1:]}
    assert singles == {
        "format_error: missing argument: command": "format_error",
        "infra_error: OOM killed": "infra_error",
        "max_steps: step limit": "max_steps",
        "reward_hack_suspected: flags: reward_hack_suspected": "reward_hack_suspected",
        "timeout: command timed out after <n> s": "timeout",
    }
    assert all(c["count"] == 1 for c in body["clusters"][1:])
    big = get(client, "/failures/clusters", judge_version="v1", min_size=2, examples=2)
    assert [c["signature"] for c in big["clusters"]] == ["test_failure: failed: test_add"]
    assert big["total_clusters"] == 1 and names(story_lake, big["clusters"][0]["example_episode_ids"]) == [
        "e2",
        "e3",
    ]
    paged = get(client, "/failures/clusters", judge_version="v1", limit=2, offset=1)
    assert [c["signature"] for c in paged["clusters"]] == [c["signature"] for c in body["clusters"][1:3]]
    v2 = get(client, "/failures/clusters")
    assert v2["judge_version"] == "v2"
    assert [(c["signature"], c["count"]) for c in v2["clusters"]] == [
        ("max_steps: step limit", 1),
        ("test_failure: failed: test_add", 1),
        ("test_failure: failed: test_edge", 1),
        ("test_failure: verdict fail, score <n>", 1),
        ("timeout: command timed out after <n> s", 1),
    ]


def test_judge_diff_shows_the_verdict_flips_of_the_rejudge(client: TestClient, story_lake: StoryLake) -> None:
    d = get(client, "/judges/tests/diff")
    assert (d["from_version"], d["to_version"]) == ("v1", "v2")
    assert (d["both"], d["only_from"], d["only_to"], d["flipped"]) == (8, 2, 0, 3)
    assert d["matrix"] == {"pass": {"pass": 1, "fail": 1}, "fail": {"pass": 2, "fail": 4}}
    assert [
        (n, f["from_verdict"], f["to_verdict"])
        for n, f in zip(names(story_lake, [f["episode_id"] for f in d["flips"]]), d["flips"])
    ] == [
        ("e1", "pass", "fail"),
        ("e2", "fail", "pass"),
        ("e7", "fail", "pass"),
    ]
    assert d["mean_score_from"] == pytest.approx(2 / 8) and d["mean_score_to"] == pytest.approx(3 / 8)
    explicit = get(client, "/judges/tests/diff", from_version="v1", to_version="v2", limit=1, offset=1)
    assert names(story_lake, [f["episode_id"] for f in explicit["flips"]]) == ["e2"]
    assert explicit["flipped"] == 3
    back = get(client, "/judges/tests/diff", from_version="v2", to_version="v1")
    assert back["matrix"] == {"pass": {"pass": 1, "fail": 2}, "fail": {"pass": 1, "fail": 4}}
    judges = get(client, "/judges")["judges"]
    assert [
        (j["name"], [(v["version"], v["episodes"], v["verdicts"]) for v in j["versions"]]) for j in judges
    ] == [("tests", [("v1", 10, {"error": 1, "fail": 7, "pass": 2}), ("v2", 8, {"fail": 5, "pass": 3})])]


def test_time_travel_answers_from_the_earlier_versions(client: TestClient, story_lake: StoryLake) -> None:
    first = story_lake.after_batch1
    assert get(client, "/episodes", version=first["episodes"])["total"] == 11
    old = get(client, "/failures/breakdown", version=first["failures"])
    # The failures table then knew v1 only: its latest version is the default.
    assert (old["judge_version"], old["total"]) == ("v1", 7)
    assert groups(old) == [("test_failure", 2), *V1_CATEGORIES[1:]]
    assert old["versions"] == {"failures": first["failures"], "rewards": story_lake.after_batch2["rewards"]}
    pinned = get(client, "/failures/breakdown", judge_version="v1", version=first["failures"], by="task")
    assert groups(pinned) == [("pyfix-1", 2), ("pyfix-2", 2), ("wp-1", 2), ("wp-2", 1)]
    assert get(client, "/judges", version=first["rewards"])["judges"][0]["versions"][-1]["version"] == "v1"
    with_rewards_then = get(
        client, "/failures/clusters", version=first["failures"], rewards_version=first["rewards"]
    )
    assert (with_rewards_then["judge_version"], with_rewards_then["total_failures"]) == ("v1", 7)
    e12 = story_lake.story.id("e12")
    gone = get(client, f"/episodes/{e12}", 404, version=first["episodes"])
    assert gone["detail"] == f"no episode '{e12}' in the episodes table at version {first['episodes']}"
    e2 = get(client, f"/episodes/{story_lake.story.id('e2')}", rewards_version=first["rewards"])
    assert [r["judge_version"] for r in e2["rewards"]] == ["v1"]
    assert get(client, "/checkpoints", version=first["checkpoints"])["total"] == 1
    # The rewards table then had one version of the judge: nothing to compare yet.
    assert get(client, "/judges/tests/diff", 422, version=first["rewards"])["detail"] == (
        "judge 'tests' has no version seen before 'v1' (versions: v1): give from_version"
    )


def test_bad_input_answers_4xx_with_a_clear_message(client: TestClient, story_lake: StoryLake) -> None:
    missing = get(client, "/episodes/no-such-episode", 404)
    assert missing == {"error": "not_found", "detail": "no episode 'no-such-episode' in the episodes table"}
    bad_by = get(client, "/failures/breakdown", 422, by="color")
    assert bad_by["error"] == "invalid_request"
    assert bad_by["detail"] == "by: Input should be 'category', 'task', 'family' or 'policy_version'"
    latest = story_lake.after_batch2["episodes"]
    beyond = get(client, "/episodes", 404, version=latest + 5)
    assert beyond == {
        "error": "version_not_found",
        "detail": f"table episodes has no version {latest + 5}: its latest version is {latest}",
    }
    assert "its latest version is 2" in get(client, "/failures/clusters", 404, version=9)["detail"]
    assert (
        get(client, "/episodes", 422, limit=0)["detail"]
        == "limit: Input should be greater than or equal to 1"
    )
    assert (
        get(client, "/episodes", 422, limit=501)["detail"]
        == "limit: Input should be less than or equal to 500"
    )
    assert get(client, "/episodes", 422, offset=-1)["detail"].startswith("offset: ")
    assert get(client, "/episodes", 422, version=-1)["detail"].startswith("version: ")
    assert get(client, "/episodes", 422, status="won")["detail"].startswith("status: Input should be")
    assert get(client, "/failures/breakdown", 404, judge="nobody")["detail"] == (
        "no judge named 'nobody'; judges: -, tests"
    )
    assert get(client, "/failures/breakdown", 404, judge_version="v9")["detail"] == (
        "judge 'tests' has no version 'v9'; its versions: v1, v2"
    )
    assert (
        get(client, "/judges/nobody/diff", 404)["detail"]
        == "no judge named 'nobody' scored episodes; judges: tests"
    )
    assert get(client, "/judges/tests/diff", 422, to_version="v1")["detail"].startswith(
        "judge 'tests' has no version seen before 'v1'"
    )
    assert (
        get(client, "/checkpoints/nope/lineage", 404)["detail"]
        == "no checkpoint 'nope' in the checkpoints table"
    )


def test_unknown_routes_methods_and_parameters_answer_in_the_apps_error_shape(
    client: TestClient, story_lake: StoryLake
) -> None:
    assert get(client, "/no/such/route", 404) == {
        "error": "not_found",
        "detail": "no route /no/such/route: the routes are listed at /docs",
    }
    r = client.delete("/episodes")
    assert r.status_code == 405 and r.json() == {
        "error": "method_not_allowed",
        "detail": "DELETE is not allowed on /episodes",
    }
    # a misspelt version pin is refused, not ignored (the answer would come from the latest version)
    typo = get(client, "/episodes", 422, rewards_versoin=1)
    assert typo["error"] == "invalid_request"
    assert typo["detail"].startswith("unknown query parameter rewards_versoin: /episodes takes ")
    assert "rewards_version" in typo["detail"]
    assert get(client, "/failures/breakdown", 422, by="task", familly="x")["detail"].startswith(
        "unknown query parameter familly: /failures/breakdown takes by, category, episodes_version, family, "
    )
    assert get(client, "/health", 422, verbose=1)["detail"] == (
        "unknown query parameter verbose: /health takes none"
    )
    # every parameter a route declares is still taken
    get(client, "/episodes", 200, rewards_version=story_lake.after_batch2["rewards"], judge="tests")
    # HEAD is GET without a body, on the page as on the JSON routes
    for path in ("/", "/health", "/episodes"):
        head, full = client.head(path), client.get(path)
        assert head.status_code == 200 and head.content == b"", path
        assert head.headers["content-type"] == full.headers["content-type"], path


def test_a_token_guards_every_route_but_health(story_lake: StoryLake) -> None:
    with TestClient(create_app(story_lake.root, token="s3cret")) as c:
        assert c.get("/health").status_code == 200
        for path in ("/tables", "/episodes", f"/episodes/{story_lake.story.id('e1')}", "/failures/breakdown",
                     "/failures/clusters", "/judges", "/judges/tests/diff", "/checkpoints",
                     "/checkpoints/ck-child/lineage"):  # fmt: skip
            r = c.get(path)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"] == "Bearer"
            assert r.json()["error"] == "unauthorized"
            assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert c.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200, path
        # The page is only code (no data): it loads, then its script asks for the token.
        page, script = c.get("/"), c.get("/static/app.js")
        assert page.status_code == 200 and script.status_code == 200 and "Authorization" in script.text


def test_page_is_self_contained_and_uses_the_json_endpoints(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert "<svg" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "an external asset"
    # what the page loads is the service's own static files, by relative URLs
    assets = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', html)
    assert sorted(assets) == ["static/app.css", "static/app.js", "static/favicon.svg"]
    for asset in assets:
        body = client.get("/" + asset)
        assert body.status_code == 200, asset
        assert not re.search(r"""(src|href|url|fetch|import)\W{0,3}(https?:)?//""", body.text), asset
    script = client.get("/static/app.js").text
    for endpoint in ("failures/breakdown", "failures/clusters", "episodes", "judges", "tables"):
        assert f'"{endpoint}' in script


def test_checkpoints_newest_first_with_lineage(client: TestClient, story_lake: StoryLake) -> None:
    body = get(client, "/checkpoints")
    assert [c["checkpoint_id"] for c in body["items"]] == ["ck-child", "ck-parent"]
    child = body["items"][0]
    assert child["parent_id"] == "ck-parent" and child["judge_version"] == "v2"
    assert child["table_versions"] == {"episodes": 2, "rewards": 2} and child["num_samples"] == 20
    chain = get(client, "/checkpoints/ck-child/lineage")
    assert [c["checkpoint_id"] for c in chain["chain"]] == ["ck-child", "ck-parent"]
    assert chain["broken_at"] is None and chain["versions"] == {
        "checkpoints": story_lake.after_batch2["checkpoints"]
    }
    # After the first batch the child did not exist yet.
    first = story_lake.after_batch1["checkpoints"]
    assert get(client, "/checkpoints/ck-child/lineage", 404, version=first)["error"] == "not_found"


def test_repeat_requests_are_served_from_the_cache_until_a_table_changes(
    story_lake: StoryLake, tmp_path: Path
) -> None:
    root = tmp_path / "lake"
    shutil.copytree(story_lake.root, root)
    app = create_app(root)
    reader = app.state.reader
    with TestClient(app) as c:
        first = get(c, "/failures/breakdown", by="family")
        assert reader.stats.reads == 3  # failures, rewards, episodes
        get(c, "/episodes", family="pyfix")
        for _ in range(5):
            assert get(c, "/failures/breakdown", by="family") == first
            get(c, "/episodes", family="wordplay", limit=2)
            get(c, "/failures/clusters")
        assert reader.stats.reads == 3, reader.stats
        # A new commit to episodes: the next request sees the new version and reads it once.
        lake = Lake(root)
        row = lake.read("episodes", where=f"episode_id = '{story_lake.story.id('e1')}'").to_pylist()[0]
        row["episode_id"] = "late-episode"
        lake.write("episodes", pa.Table.from_pylist([row]), mode="upsert")
        body = get(c, "/episodes", family="pyfix")
        assert body["versions"] == {"episodes": story_lake.after_batch2["episodes"] + 1}
        assert body["total"] == 8 and "late-episode" in [e["episode_id"] for e in body["items"]]
        assert reader.stats.reads == 4
        # The earlier version is still cached: time travel to it reads nothing.
        assert get(c, "/episodes", version=story_lake.after_batch2["episodes"], family="pyfix")["total"] == 7
        assert reader.stats.reads == 4


def test_failure_cases_split_signatures_by_family_with_trend_and_newest_examples(
    client: TestClient, story_lake: StoryLake
) -> None:
    from collections import Counter

    from api.analysis import cluster_id

    body = get(client, "/failures/cases", judge_version="v1")
    by_signature = get(client, "/failures/clusters", judge_version="v1")
    assert body["total_failures"] == by_signature["total_failures"] == 8
    # a case cluster is a signature cluster of one task family: the counts add up per signature
    per_signature: Counter[str] = Counter()
    for c in body["clusters"]:
        per_signature[c["signature"]] += c["count"]
        assert c["cluster_id"] == cluster_id(c["family"], c["category"], c["signature"])
        assert sum(v["count"] for v in c["trend"]) == c["count"] and c["cases"] == []
    assert per_signature == {c["signature"]: c["count"] for c in by_signature["clusters"]}
    top = body["clusters"][0]
    assert top["signature"] == "test_failure: failed: test_add" and top["count"] == 3
    assert names(story_lake, top["example_episode_ids"]) == ["e12", "e3", "e2"]  # newest first
    # the trend, from the episodes table: each member's policy version, versions by their first episode
    episodes = Lake(story_lake.root).read("episodes").to_pylist()
    policy = {e["episode_id"]: e["policy_version"] for e in episodes}
    first: dict[str, Any] = {}
    for e in sorted(episodes, key=lambda e: e["started_at"]):
        first.setdefault(e["policy_version"], e["started_at"])
    counts = Counter(policy[i] for i in top["example_episode_ids"])
    assert len(counts) == 2  # (the story spans two policy versions here)
    assert [(v["policy_version"], v["count"]) for v in top["trend"]] == sorted(
        counts.items(), key=lambda vc: first[vc[0]]
    )
    assert "failure_cases" in body["versions"]


def test_cursor_pages_read_the_first_pages_versions_while_the_lake_moves_on(
    story_lake: StoryLake, tmp_path: Path
) -> None:
    root = tmp_path / "lake"
    shutil.copytree(story_lake.root, root)
    every = [story_lake.story.id(f"e{i}") for i in range(12, 0, -1)]
    with TestClient(create_app(root)) as c:
        first = get(c, "/episodes", limit=5)
        assert [e["episode_id"] for e in first["items"]] == every[:5] and first["next_cursor"]
        # the pipeline commits a newer episode between two pages
        lake = Lake(root)
        row = lake.read("episodes", where=f"episode_id = '{every[0]}'").to_pylist()[0]
        row["episode_id"], row["started_at"] = "late-episode", row["started_at"].replace(year=2099)
        lake.write("episodes", pa.Table.from_pylist([row]), mode="upsert")
        assert get(c, "/episodes", limit=5)["items"][0]["episode_id"] == "late-episode"
        # paging on by cursor: the same version, the same total, nothing skipped or repeated
        pages, cursor = [first], first["next_cursor"]
        while cursor:
            page = get(c, "/episodes", limit=5, cursor=cursor)
            assert page["versions"] == first["versions"] and page["total"] == 12
            pages.append(page)
            cursor = page["next_cursor"]
        assert [e["episode_id"] for p in pages for e in p["items"]] == every
        assert [p["offset"] for p in pages] == [0, 5, 10]
        # (by offset, the same page shows the shift: the late episode pushed every[4] onto it)
        assert get(c, "/episodes", limit=5, offset=5)["items"][0]["episode_id"] == every[4]

        # filters belong to the cursor; a malformed one, or one beside an offset, is a clear 422
        wordplay = get(c, "/episodes", limit=2, family="wordplay")
        assert get(c, "/episodes", 422, limit=2, cursor=wordplay["next_cursor"])["detail"].startswith(
            "cursor: it was made for other filters"
        )
        again = get(c, "/episodes", limit=2, family="wordplay", cursor=wordplay["next_cursor"])
        assert again["offset"] == 2 and again["total"] == wordplay["total"]
        assert get(c, "/episodes", 422, cursor="not-a-cursor")["detail"].startswith(
            "cursor: not a cursor this API made"
        )
        assert get(c, "/episodes", 422, offset=5, cursor=first["next_cursor"])["detail"] == (
            "give either cursor or offset, not both: the cursor holds its offset"
        )
        latest = first["versions"]["episodes"] + 1
        assert (
            "the cursor reads episodes at version"
            in get(c, "/episodes", 422, cursor=first["next_cursor"], version=latest)["detail"]
        )

        # every list pages by cursor (a page holding the rest has none)
        for path, params in (("/failures/clusters", {}), ("/failures/cases", {}),
                             ("/judges/tests/diff", {}), ("/checkpoints", {}), ("/review/queue", {}),
                             ("/quarantine", {}), ("/search", {"q": "e"})):  # fmt: skip
            whole = get(c, path, limit=500, **params)
            assert whole["next_cursor"] is None, path
            one = get(c, path, limit=1, **params)
            items = next(k for k in ("clusters", "flips", "items") if k in one)
            if len(whole[items]) > 1:
                second = get(c, path, limit=1, cursor=one["next_cursor"], **params)
                assert second[items] == whole[items][1:2], path
                assert second["versions"] == one["versions"], path
