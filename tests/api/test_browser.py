"""The workbench page in a real browser: Debian's Chromium driven by Playwright, over a real lake.

The lake is the story lake (tests/api/conftest.py) with one more topic folded into it by the
real pipeline: a record it quarantines and an imported episode (its prompt as chat messages, its
instruction in metadata, an unmapped message kept as a raw JSON annotation). The app serves it
with a reader's token and a reviewer, from uvicorn in a thread; one browser serves the module,
each test a context of its own. Every test fails on a console error or an uncaught exception in
the page, and saves a screenshot of each view it shows into ``$TRAJLAKE_ARTIFACTS`` (else its
temporary directory).

Without ``/usr/bin/chromium`` or Playwright the browser tests are skipped, unless
``TRAJLAKE_REQUIRE_BROWSER=1`` (then they fail). Nothing is downloaded.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from api import create_app
from ingest.blobs import BlobStore
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from pipelines import PipelineConfig, run_once
from schemas import new_id
from schemas.codec import serialize_event
from schemas.control import REVIEW_ITEM, control_event
from tests.api.conftest import StoryLake
from tests.api.lake_story import Story
from tests.conftest import free_port
from tests.pipelines.factories import ev
from tests.pipelines.log_workload import produce

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.kafka

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "browser-readers-token"
REVIEWER = "browser-reviewer-ann"
INSTRUCTION = "Reverse the order of the words in input.txt and print them"
REFUSED = "console: Failed to load resource: the server responded with a status of {} ({})"
"""What Chromium logs for any answer 4xx (a network line, not an error of the page's own)."""


# ------------------------------------------------------------------ the lake and the server


BLOB_TEXT = "".join(f"line {i} of a long output\n" for i in range(2000))
"""The tool output the imported episode keeps in the blob store (its step holds a preview)."""


def imported_episode(stdout_ref: dict[str, Any]) -> list[dict[str, Any]]:
    """An imported episode: a chat prompt, a tool call that fails, a raw annotation."""
    eid = new_id()
    started = {
        "task": {"id": "rev-1", "family": "imported"},
        "policy": {"id": "mini-swe-agent", "version": "gpt-x"},
        "sampling": {"temperature": 0.7},
        "metadata": {"instruction": INSTRUCTION, "source": "import"},
    }
    call = {
        "messages": [
            {"role": "system", "content": "You are a careful agent."},
            {"role": "user", "content": INSTRUCTION},
        ],
        "completion": "```bash\nrev input.txt\n```",
        "prompt_tokens": 42,
        "completion_tokens": 7,
        "finish_reason": "stop",
        "model": "gpt-x",
        "sampling": {"temperature": 0.7},
    }
    out = {"text": BLOB_TEXT[:60], "size": len(BLOB_TEXT), "blob": stdout_ref}
    err = {"text": "rev: input.txt: No such file", "size": 28}
    answer = {  # the second prompt repeats the first and adds to it
        "messages": [
            *call["messages"],
            {"role": "assistant", "content": call["completion"]},
            {"role": "tool", "content": err["text"], "tool_call_id": "c1"},
        ],
        "completion": "The file is missing: nothing to reverse.",
        "prompt_tokens": 60,
        "completion_tokens": 9,
    }
    return [
        ev(eid, 0, "episode_started", started),
        ev(eid, 1, "model_call", call),
        ev(eid, 2, "tool_call", {"call_id": "c1", "tool": "bash", "arguments": {"command": "rev input.txt"}}),
        ev(eid, 3, "tool_result", {"call_id": "c1", "exit_code": 1, "stdout": out, "stderr": err}),
        ev(eid, 4, "model_call", answer),
        ev(eid, 5, "annotation", {"key": "unmapped", "value": {"role": "user", "content": "format error"}}),
        ev(eid, 6, "episode_ended", {"status": "failure"}),
    ]


QUEUE_REASON = "its tool failed with exit 1 and no judge scored it"


def queue_item(episode_id: str) -> dict[str, Any]:
    """The review queue's row for the imported episode (as `trajlake review fill` queues one)."""
    return {
        "item_id": "rv-0123456789ab", "episode_id": episode_id, "rule": "unjudged-tool-error",
        "kind": "failure", "reason": QUEUE_REASON, "task_id": "rev-1", "task_family": "imported",
        "judge_name": None, "judge_version": None, "judge_verdict": None,
        "queued_at": dt.datetime(2026, 11, 2, tzinfo=dt.UTC), "fill_id": "fill-browser",
    }  # fmt: skip


@dataclass
class Served:
    """The app over the browser's lake, and what it holds."""

    base: str
    story: Story
    copies: int
    """Times the story is in the lake (the conftest's topic is per process: each module's story
    lake folds the stories of the modules before it too)."""
    imported_id: str
    published: list[Any] = field(default_factory=list)


@pytest.fixture(scope="module")
def served(
    story_lake: StoryLake, kafka: EmbeddedKafka, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("browser-lake") / "lake"
    shutil.copytree(story_lake.root, root)
    topic, curation = f"api.browser.{os.getpid()}", f"api.browser.curation.{os.getpid()}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 1, curation: 1}).ensure_topics()
    blobs = BlobStore(str(root.parent / "blobs"))
    ref = blobs.put_text(BLOB_TEXT)

    docs = imported_episode({"sha256": ref.sha256, "size": ref.size})
    records = [(topic, d["episode_id"].encode(), json.dumps(d).encode()) for d in docs]
    item = control_event(REVIEW_ITEM, queue_item(docs[0]["episode_id"]), "review-fill")
    queued = (curation, item.episode_id.encode(), serialize_event(item))
    produce(kafka.bootstrap, [(topic, b"bad-key", b"{not json"), *records, queued])
    cfg = PipelineConfig(
        bootstrap=kafka.bootstrap,
        lake_root=str(root),
        topics=(topic, curation),
        control_topics={"review_item": curation},
        worker_log=str(root.parent / "workers.log"),
    )
    assert len(run_once(cfg)) == 1
    families = Lake(root).read("episodes", columns=["task_family"])["task_family"].to_pylist()
    copies = sum(f in ("pyfix", "wordplay") for f in families) // len(story_lake.story.episodes)
    published: list[Any] = []
    app = create_app(
        root,
        token=TOKEN,
        reviewers={"ann": REVIEWER},
        publish=published.extend,
        blobs=blobs.read_or_missing,
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-browser-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:  # (uvicorn sets it once it listens)
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}/", story_lake.story, copies, docs[0]["episode_id"], published)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def api(served: Served, path: str, **params: Any) -> Any:
    r = httpx.get(served.base + path, params=params, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


# ------------------------------------------------------------------ the browser and its pages


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python Playwright is not installed"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    missing = _missing()
    if missing is not None:
        if os.environ.get("TRAJLAKE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TRAJLAKE_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(f"no browser to test the page in: {missing} (TRAJLAKE_REQUIRE_BROWSER=1 makes this fail)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("TRAJLAKE_ARTIFACTS")
    folder = Path(where) / "browser" if where else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class Watched:
    """A page, and what went wrong in it."""

    page: Page
    base: str
    artifacts: Path
    """Where its screenshots go (a folder per test)."""
    errors: list[str] = field(default_factory=list)
    refused: Counter[int] = field(default_factory=Counter)
    """Answers 4xx the page received, by status."""

    def show(self, route: str, view: str, state: str = "ready") -> None:
        """Open ``#<route>`` and wait until the view named ``view`` is drawn (or its error is)."""
        # (mark the view stale first: a hash change within the page draws it again)
        self.page.evaluate("document.getElementById('view').dataset.state = 'stale'")
        self.page.goto(self.base + "#" + route)
        self.ready(view, state)

    def ready(self, view: str, state: str = "ready") -> None:
        self.page.wait_for_selector(f'#view[data-state="{state}"][data-view="{view}"]')

    def shot(self, name: str) -> None:
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(self.artifacts / f"{name}.png"), full_page=True)

    def assert_clean(self, *, expected: tuple[int, ...] = ()) -> None:
        """No console error and no uncaught exception, but Chromium's line for each answer of the
        ``expected`` statuses (the page asked for them on purpose)."""
        errors = self.errors
        for status in expected:
            line = REFUSED.format(status, HTTPStatus(status).phrase)
            assert 0 < errors.count(line) <= self.refused[status], (status, self.refused)
            errors = [e for e in errors if e != line]
        assert errors == []


@pytest.fixture
def open_page(
    browser: Browser, served: Served, artifacts: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Watched]]:
    contexts = []

    def opened(*, token: str | None = REVIEWER, width: int = 1200) -> Watched:
        context = browser.new_context(viewport={"width": width, "height": 900})
        contexts.append(context)
        if token is not None:  # as if typed into the token box once, in this tab
            context.add_init_script(f"sessionStorage.setItem('trajlake.token', {json.dumps(token)})")
        page = context.new_page()
        page.set_default_timeout(10_000)
        watched = Watched(page, served.base, artifacts / request.node.name.removeprefix("test_"))
        page.on(
            "console", lambda m: watched.errors.append(f"console: {m.text}") if m.type == "error" else None
        )
        page.on("pageerror", lambda e: watched.errors.append(f"page error: {e}"))
        page.on("response", lambda r: watched.refused.update([r.status] if r.status >= 400 else []))
        page.goto(served.base)
        return watched

    yield opened
    for context in contexts:
        context.close()


def scroll_width(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


# ------------------------------------------------------------------ the tests


def test_every_view_shows_the_story_at_800px_without_scrolling_the_page(
    open_page: Callable[..., Watched], served: Served
) -> None:
    from playwright.sync_api import expect

    w = open_page(width=800)
    page, n, story = w.page, served.copies, served.story
    at = page.locator
    timeout = next(
        c for c in api(served, "failures/cases")["clusters"] if c["signature"].startswith("timeout: command")
    )

    def seen(name: str) -> None:
        assert scroll_width(page) <= 800, (name, scroll_width(page))
        w.shot(name)

    w.show("/failures", "failures")
    expect(at("#breakdown-total")).to_have_text(f"{5 * n} failures under tests v2, by category")
    expect(at('#breakdown tr[data-key="test_failure"] td.num').first).to_have_text(str(3 * n))
    expect(at(f'#cases tr[data-cluster="{timeout["cluster_id"]}"]')).to_contain_text("wordplay")
    expect(at("#lake-tables summary")).to_have_text("The lake: 14 tables")
    seen("failures")

    w.show("/failures?by=family&judge_version=v1", "failures")
    expect(at("#judge-version")).to_have_value("v1")
    expect(at("#breakdown-total")).to_have_text(f"{8 * n} failures under tests v1, by family")
    expect(at('#breakdown tr[data-key="pyfix"] td.num').first).to_have_text(str(5 * n))
    expect(at('#breakdown tr[data-key="wordplay"] td.num').first).to_have_text(str(3 * n))
    seen("failures-family-v1")

    w.show("/clusters", "clusters")
    expect(at("#clusters")).to_contain_text("timeout: command timed out after <n> s")
    expect(at("#clusters")).to_contain_text("command timed out after 30 s")
    seen("signatures")

    w.show(f"/cluster/{timeout['cluster_id']}", "cluster")
    expect(at("#cluster-signature")).to_have_text("timeout: command timed out after <n> s")
    expect(at("#cluster-episodes a[data-episode]")).to_have_count(min(n, 20))
    seen("cluster")

    w.show("/episodes?task_id=wp-2", "episodes")
    expect(at("#episodes tbody tr")).to_have_count(2 * n)
    expect(at("#episodes tbody tr").first).to_contain_text("wp-2wordplaypol2success")  # policy, then version
    seen("episodes")

    w.show(f"/episode/{story.id('e7')}", "episode")
    expect(at("li.step.failing")).to_have_attribute("data-seq", "3")
    expect(at("li.step.failing .exit")).to_have_text("error: invalid_arguments")
    expect(at("#episode-policy")).to_have_text("pol")
    expect(at("#episode-policy-version")).to_have_text("2")
    # the learner's side: its one sample row has no token ids, and the story's checkpoints recorded
    # no samples version and no selection, so whether they trained on it is said to be unknowable
    expect(at("#learner-samples tbody tr")).to_have_count(1)
    expect(at("#learner-samples tbody tr td.problem")).to_have_text("no_token_data")
    expect(at("#learner-samples tbody tr a")).to_have_text("#1")
    learner = at("#learner-checkpoints tbody tr")
    expect(learner).to_have_count(2)
    expect(learner.locator("a.id")).to_have_text(["ck-child", "ck-parent"])
    expect(learner.first).to_contain_text("cannot tell")
    expect(learner.first.locator("td.reason")).to_contain_text(
        "lineage_incompleteits lineage records no samples version, no selection"
    )
    expect(at("#learner-summary")).to_have_text(
        "whether the 2 checkpoints that read it trained on it cannot be told (lineage_incomplete)"
    )
    seen("episode")

    w.show("/search?q=filenotfounderror", "search")
    expect(at("#search-total")).to_contain_text(f"{n} episode")
    expect(at(f'#search-results a[data-episode="{story.id("e11")}"]').first).to_be_visible()
    expect(at("#search-results mark").first).to_have_text("FileNotFoundError")
    seen("search")

    w.show("/judges", "judges")
    expect(at('[data-judge="tests"] tbody tr')).to_have_count(2)
    seen("judges")

    w.show("/judges/tests/diff?from=v1&to=v2", "judges")
    expect(at("#flipped")).to_have_text(str(3 * n))
    seen("judge-diff")

    w.show("/review", "review")
    expect(at("[data-item]")).to_have_count(1)
    expect(at("[data-item] p").first).to_have_text(QUEUE_REASON)
    seen("review")

    w.show("/checkpoints", "checkpoints")
    expect(at("#checkpoints tbody tr").first).to_contain_text("ck-childck-parentpol")
    seen("checkpoints")

    w.show("/checkpoints/ck-child", "checkpoints")
    expect(at("#lineage > li > b")).to_have_text(["ck-child", "ck-parent"])
    seen("lineage")

    w.show("/health", "health")
    expect(at("#prometheus-status")).to_contain_text("Prometheus is not configured")
    expect(at("#quarantine-count")).to_contain_text("1 record of the log quarantined")
    expect(at("#quarantine-reasons li")).to_have_count(1)
    expect(at("#quarantine-reasons li")).to_contain_text("1 ×")
    versions = api(served, "platform")["versions"]
    expect(at('#table-versions [data-table="quarantine"]')).to_have_text(
        f"quarantine v{versions['quarantine']}"
    )
    expect(at('#table-versions [data-table="checkpoints"]')).to_have_text(
        f"checkpoints v{versions['checkpoints']}"
    )
    expect(at('#nav a[aria-current="page"]')).to_have_text("Health")
    seen("health")

    at("#quarantine-reasons a", has_text="not UTF-8 JSON").click()  # a reason opens the quarantine
    w.ready("quarantine")
    expect(at("#quarantine-total")).to_contain_text("1 record of the log could not be parsed")
    expect(at("#quarantine .reason")).to_contain_text("not UTF-8 JSON")
    seen("quarantine")
    w.assert_clean()


def test_dashboard_cluster_episode_then_judge_flips_and_a_verdict_through_the_form(
    open_page: Callable[..., Watched], served: Served
) -> None:
    from playwright.sync_api import expect

    w = open_page()
    page, n, story = w.page, served.copies, served.story
    w.show("/failures", "failures")
    page.locator("#cases a.cluster-link", has_text="timeout: command timed out after <n> s").click()
    w.ready("cluster")
    expect(page.locator("#cluster-signature")).to_have_text("timeout: command timed out after <n> s")
    expect(page.locator(".trend.big")).to_have_attribute("aria-label", f"failures per policy version: 2: {n}")
    w.shot("cluster")
    example = page.locator("#cluster-episodes a[data-episode]").first
    episode_id = example.get_attribute("data-episode")
    example.click()
    w.ready("episode")
    expect(page).to_have_url(re.compile(rf"#/episode/{episode_id}\?step=3$"))
    expect(page.locator("#episode-id")).to_have_text(str(episode_id))
    failing = page.locator("li.step.failing")
    expect(failing).to_have_count(1)
    expect(failing).to_have_attribute("data-seq", "3")
    expect(failing).to_have_class(re.compile(r"\bcurrent\b"))
    expect(failing.locator(".failing-note")).to_have_text(
        "failing step · tests v1: timeout; tests v2: timeout"
    )
    expect(failing.locator(".exit")).to_have_text("timed out")
    expect(failing).to_contain_text("command timed out after 30 s")
    chat = page.locator('li.step[data-type="model_call"]')
    expect(chat.locator(".msg.completion .text")).to_contain_text("think think think")
    expect(chat.locator(".meta")).to_contain_text("tokens: 10 prompt · 5 completion")
    expect(page.locator("#episode-policy")).to_have_text("pol")
    expect(page.locator("#episode-policy-version")).to_have_text("2")
    w.shot("episode")

    page.locator("#nav a", has_text="Judges").click()
    w.ready("judges")
    page.locator('[data-judge="tests"] button', has_text="show flips").click()
    expect(page).to_have_url(re.compile(r"#/judges/tests/diff\?from=v1&to=v2$"))
    expect(page.locator("#flip-matrix")).to_be_visible()
    diff = api(served, "judges/tests/diff", from_version="v1", to_version="v2")
    cells = page.locator("#flip-matrix td[data-from]")
    shown = {
        (cells.nth(i).get_attribute("data-from"), cells.nth(i).get_attribute("data-to")): int(
            cells.nth(i).inner_text()
        )
        for i in range(cells.count())
    }
    verdicts = {v for f, row in diff["matrix"].items() for v in (f, *row)}
    assert shown == {(f, t): diff["matrix"].get(f, {}).get(t, 0) for f in verdicts for t in verdicts}
    assert shown[("fail", "pass")] == 2 * n and shown[("pass", "fail")] == n  # e2, e7 and e1 flipped
    expect(page.locator("#flipped")).to_have_text(str(diff["flipped"]))
    w.shot("judge-diff")

    page.locator(f'#flips a[data-episode="{story.id("e2")}"]').click()
    w.ready("episode")
    expect(page.locator("#episode-id")).to_have_text(story.id("e2"))
    form = page.locator(".verdict-form")
    form.locator('select[name="verdict"]').select_option("judge_wrong")
    form.locator('textarea[name="note"]').fill("v2 passes an episode whose test_add failed")
    form.locator("button", has_text="record verdict").click()
    expect(page.locator(".verdict-status .notice")).to_contain_text(
        "Verdict “judge_wrong” by ann recorded in the log"
    )
    w.shot("verdict")
    assert len(served.published) == 1
    assert served.published[0].payload.value == {
        "episode_id": story.id("e2"),
        "reviewer": "ann",
        "verdict": "judge_wrong",
        "note": "v2 passes an episode whose test_add failed",
        "item_id": None,
        "judge_name": "tests",
        "judge_version": "v1",
        "judge_verdict": "fail",
        "reviewed_at": served.published[0].payload.value["reviewed_at"],
    }
    w.assert_clean()


def test_the_token_prompt_says_a_token_is_needed_then_that_a_wrong_one_is_wrong(
    open_page: Callable[..., Watched],
) -> None:
    from playwright.sync_api import expect

    w = open_page(token=None)
    page = w.page
    box, message = page.locator("#token-box"), page.locator("#token-message")
    expect(box).to_be_visible()
    expect(box).to_have_attribute("data-reason", "missing")
    expect(message).to_contain_text("This API needs a token")
    expect(page.locator("#view")).to_contain_text("Enter the API's token above")
    needed = message.inner_text()
    w.shot("token-needed")
    page.fill("#token", "not-the-token")
    page.locator("#token-form button[type=submit]").click()
    expect(box).to_have_attribute("data-reason", "wrong")
    expect(message).to_contain_text("The token you gave was refused")
    expect(message).to_contain_text("the bearer token is not valid for this API")
    wrong = message.inner_text()
    assert wrong != needed and "needs a token" not in wrong
    w.shot("token-wrong")
    page.fill("#token", TOKEN)
    page.locator("#token-form button[type=submit]").click()
    w.ready("failures")
    expect(box).to_be_hidden()
    expect(page.locator("#breakdown-total")).to_contain_text("failures under tests v2")
    # any other refusal shows the API's own words
    w.show("/episode/no-such-episode", "episode", state="error")
    expect(page.locator("#error")).to_have_text(
        "404 not_found: no episode 'no-such-episode' in the episodes table"
    )
    w.assert_clean(expected=(401, 404))


def test_a_deep_link_opens_the_episode_at_its_step_and_keys_move_the_step(
    open_page: Callable[..., Watched], served: Served
) -> None:
    from playwright.sync_api import expect

    w = open_page()
    page, e2 = w.page, served.story.id("e2")
    w.show(f"/episode/{e2}?step=3", "episode")
    current = page.locator("li.step.current")
    expect(current).to_have_attribute("data-seq", "3")
    expect(current.locator(".exit")).to_have_text("exit 1")
    expect(current).to_contain_text("FAILED test_add - AssertionError: assert 3 == 4")
    expect(page.locator("li.step.failing")).to_have_attribute("data-seq", "4")  # v1's reward: v2 passed it
    for key, seq in (("j", 4), ("ArrowDown", 5), ("ArrowDown", 5), ("k", 4), ("ArrowUp", 3), ("ArrowUp", 2)):
        page.keyboard.press(key)
        expect(current).to_have_attribute("data-seq", str(seq))
        expect(page).to_have_url(re.compile(rf"#/episode/{e2}\?step={seq}$"))
    expect(page.locator("#step-position")).to_have_text("step 2 (3 of 6)")
    page.reload()  # the link the keys left is a deep link
    w.ready("episode")
    expect(page.locator("li.step.current")).to_have_attribute("data-seq", "2")
    expect(page.locator("li.step.current")).to_contain_text("$ pytest -q")
    evidence = page.locator("#episode-rewards details").first
    expect(evidence.locator("pre")).to_be_hidden()
    evidence.locator("summary").click()
    expect(evidence.locator("pre")).to_contain_text('"name": "test_add"')
    w.shot("deep-link")
    w.assert_clean()


def test_search_finds_an_imported_episode_by_its_instruction_and_shows_its_chat(
    open_page: Callable[..., Watched], served: Served
) -> None:
    from playwright.sync_api import expect

    w = open_page()
    page = w.page
    w.ready("failures")
    page.fill("#search-q", "reverse the ORDER")
    page.press("#search-q", "Enter")
    w.ready("search")
    expect(page).to_have_url(re.compile(r"#/search\?q=reverse\+the\+ORDER$"))
    results = page.locator("#search-results > li")
    expect(results).to_have_count(1)
    expect(results.locator("mark")).to_have_text("Reverse the order")
    w.shot("search")
    results.locator(f'a[data-episode="{served.imported_id}"]').first.click()
    w.ready("episode")
    expect(page.locator("#episode-policy")).to_have_text("mini-swe-agent")
    expect(page.locator("#episode-policy-version")).to_have_text("gpt-x")
    chat = page.locator('li.step[data-type="model_call"] .chat').first
    expect(chat.locator(".msg .role")).to_have_text(["system", "user", "assistant · completion"])
    expect(chat.locator(".msg.system .text")).to_have_text("You are a careful agent.")
    expect(chat.locator(".msg.user .text")).to_have_text(INSTRUCTION)
    expect(chat.locator(".msg.completion .text")).to_have_text("```bash\nrev input.txt\n```")
    expect(chat.locator(".meta")).to_contain_text("tokens: 42 prompt · 7 completion")
    expect(chat.locator(".meta")).to_contain_text("sampling: temperature=0.7")
    expect(chat.locator(".meta")).to_contain_text("finish: stop")
    answer = page.locator('li.step[data-type="model_call"] .chat').nth(1)
    history = answer.locator("details.history")
    expect(history.locator("summary")).to_have_text("the 2 messages of step #1's prompt")
    expect(history.locator(".msg").first).to_be_hidden()  # folded: the first call shows them
    expect(answer.locator(":scope > .msg .role")).to_have_text(
        ["assistant", "tool · answers c1", "assistant · completion"]
    )
    expect(answer.locator(":scope > .msg.tool .text")).to_have_text("rev: input.txt: No such file")
    expect(answer.locator(".msg.completion .text")).to_have_text("The file is missing: nothing to reverse.")
    result = page.locator('li.step[data-type="tool_result"]')
    expect(result.locator(".exit")).to_have_text("exit 1")
    expect(result).to_contain_text("rev: input.txt: No such file")
    # stdout is a preview of a blob: opened on demand, in place
    opener = result.locator("button.open-blob")
    expect(opener).to_have_text(f"open the whole text ({len(BLOB_TEXT):,} bytes)")
    expect(result.locator("pre").first).to_have_text(BLOB_TEXT[:60])
    opener.click()
    expect(opener).to_have_text(f"the whole text ({len(BLOB_TEXT):,} bytes)")
    assert result.locator("pre").first.evaluate("e => e.textContent") == BLOB_TEXT
    raw = page.locator('li.step[data-type="annotation"] details').first
    expect(raw.locator("pre")).to_be_hidden()  # folded until opened
    raw.locator("summary").click()
    expect(raw.locator("pre")).to_contain_text('"content": "format error"')
    w.shot("imported-episode")
    w.assert_clean()


def test_health_shows_prometheus_values_and_alerts_firing_first_or_why_it_could_not_be_read(
    open_page: Callable[..., Watched], served: Served
) -> None:
    """The browser's app has no Prometheus (a real one is tested in tests/deploy/test_monitoring.py):
    its ``/platform`` answer is completed here with a Prometheus half built from the API's own models."""
    from playwright.sync_api import Route, expect

    from api.platform import AlertPublic, PlatformPublic, PrometheusHealthPublic

    lake_half = api(served, "platform")
    values = {"pipeline_lag": 1234.0, "quarantine_rate": 0.0123, "records_per_second": 56.78,
              "sandbox_pool_size": 8.0, "sandbox_in_use": 3.0, "judge_error_rate": None}  # fmt: skip
    alerts = [
        AlertPublic(name="TrajlakeQuarantineRateHigh", state="firing", severity="page",
                    summary="More than 1% of records are quarantined", labels={"topic": "trajlake.episodes"}),
        AlertPublic(name="TrajlakePipelineLagging", state="pending", severity="ticket", summary=None),
    ]  # fmt: skip
    answers = [
        PrometheusHealthPublic(url="http://prom:9090", values=values, alerts=alerts),
        PrometheusHealthPublic(url="http://prom:9090", error="Prometheus at http://prom:9090 could not be "
                               "read: [Errno 111] Connection refused"),
    ]  # fmt: skip

    def platform(route: Route) -> None:
        body = PlatformPublic(**{**lake_half, "prometheus": answers[0]}).model_dump(mode="json")
        route.fulfill(json=body)

    w = open_page()
    page = w.page
    page.route(re.compile(r"/platform$"), platform)
    w.show("/health", "health")
    stat = page.locator("#prometheus .stat")
    expect(stat.locator(".stat-label")).to_have_text(
        ["pipeline lag", "records / s", "quarantine rate", "judge error rate", "sandboxes in use / pool"]
    )
    expect(stat.locator(".stat-value")).to_have_text(["1,234 records", "56.8", "1.2%", "no data", "3 / 8"])
    rows = page.locator("#alerts tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("data-state", "firing")
    expect(rows.first).to_contain_text(
        "firingTrajlakeQuarantineRateHighpageMore than 1% of records are quarantined"
    )
    expect(rows.first).to_contain_text("topic=trajlake.episodes")
    expect(rows.nth(1)).to_contain_text("pendingTrajlakePipelineLaggingticket")
    expect(page.locator("#prometheus h3")).to_have_text("Alerts · 1 firing")
    expect(page.locator("#quarantine-count")).to_contain_text("1 record of the log quarantined")
    w.shot("health-prometheus")
    answers.pop(0)
    page.reload()  # (the same hash again would not draw the view again)
    w.ready("health")
    expect(page.locator("#prometheus-status")).to_have_text(
        "Prometheus at http://prom:9090 could not be read: [Errno 111] Connection refused"
    )
    expect(page.locator("#prometheus-status")).to_have_class(re.compile(r"\bbad\b"))
    expect(page.locator("#prometheus .stat")).to_have_count(0)
    expect(page.locator("#quarantine-reasons li")).to_have_count(1)  # the lake's half all the same
    w.shot("health-prometheus-error")
    w.assert_clean()


def test_the_page_is_static_files_served_without_a_token_and_nothing_else(tmp_path: Path) -> None:
    with TestClient(create_app(tmp_path / "lake", token="s3cret")) as c:
        page = c.get("/")
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "connect-src 'self'" in page.headers["content-security-policy"]
        for name, kind in (
            ("app.js", "text/javascript"),
            ("app.css", "text/css"),
            ("favicon.svg", "image/svg+xml"),
        ):
            r = c.get(f"/static/{name}")
            assert r.status_code == 200 and r.headers["content-type"].startswith(kind), name
            head = c.head(f"/static/{name}")
            assert head.status_code == 200 and head.content == b"", name
        for bad in ("/static/page.py", "/static/nope.js", "/static/..%2Fpage.py", "/static/.hidden.js"):
            r = c.get(bad)
            assert r.status_code == 404 and r.json()["error"] == "not_found", bad
        assert c.get("/episodes").status_code == 401


def test_the_dashboard_crosses_two_keys_and_a_cell_filters_to_its_failures(
    open_page: Callable[..., Watched], served: Served
) -> None:
    from playwright.sync_api import expect

    w = open_page()
    page, n = w.page, served.copies
    w.show("/failures?by=category&then=family", "failures")
    cross = page.locator("#crosstab")
    expect(cross.locator("thead th")).to_have_text(["category \\ family", "wordplay", "pyfix"])
    row = cross.locator('tbody tr[data-key="test_failure"] td')
    expect(row).to_have_text(["test_failure", str(n), str(2 * n)])
    w.shot("crosstab")
    row.nth(2).locator("a").click()  # test_failure x pyfix: only those failures
    w.ready("failures")
    expect(page).to_have_url(re.compile(r"category=test_failure"))
    expect(page).to_have_url(re.compile(r"family=pyfix"))
    expect(page.locator("#breakdown-total")).to_have_text(re.compile(rf"^{2 * n} failures under tests v2"))
    expect(page.locator("#filters a.chip")).to_have_text(["category: test_failure ×", "family: pyfix ×"])
    page.locator("#filters a.chip", has_text="family: pyfix").click()
    w.ready("failures")
    expect(page.locator("#filters a.chip")).to_have_text(["category: test_failure ×"])
    expect(page.locator("#breakdown-total")).to_have_text(re.compile(rf"^{3 * n} failures under tests v2"))
    w.assert_clean()


def test_a_queued_item_shows_why_its_timeline_beside_it_and_takes_a_verdict(
    open_page: Callable[..., Watched], served: Served
) -> None:
    from playwright.sync_api import expect

    w = open_page()
    page = w.page
    w.show("/review", "review")
    item = page.locator("[data-item]")
    expect(item.locator(".pill").first).to_have_text("unjudged-tool-error")
    expect(item.locator("p").first).to_have_text(QUEUE_REASON)
    beside = item.locator("details.beside")
    beside.locator("summary").click()  # the episode's steps load in place, the failing one marked
    steps = beside.locator("li.step")
    expect(steps).to_have_count(7)
    expect(beside.locator("li.step.failing")).to_have_attribute("data-seq", "3")
    expect(beside.locator('li.step[data-type="tool_result"]')).to_contain_text("rev: input.txt: No such file")
    w.shot("queue-item")
    before = len(served.published)
    form = item.locator(".verdict-form")
    form.locator('select[name="verdict"]').select_option("task_broken")
    form.locator("button", has_text="record verdict").click()
    expect(item.locator(".verdict-status .notice")).to_contain_text("Verdict “task_broken” by ann recorded")
    assert len(served.published) == before + 1
    verdict = served.published[-1].payload.value
    assert (verdict["episode_id"], verdict["verdict"], verdict["item_id"]) == (
        served.imported_id,
        "task_broken",
        "rv-0123456789ab",
    )
    w.assert_clean()
