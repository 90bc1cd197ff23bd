"""The pure fold and failure attribution, on hand-made episodes with known answers."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from pipelines import episode_row, failure_rows, fold_episode, normalise_error, reward_rows, step_rows
from tests.pipelines.factories import (
    T0,
    call,
    ended,
    model,
    result,
    reward,
    sandbox,
    started,
    typed,
)

E = "ep-1"


def full_episode(verdict: str = "pass") -> list[dict]:  # type: ignore[type-arg]
    return [
        started(E),
        model(E, 1),
        call(E, 2),
        result(
            E,
            3,
            exit_code=0 if verdict == "pass" else 1,
            stdout="1 passed" if verdict == "pass" else "FAILED test_add - AssertionError: assert 6 == 5",
        ),
        reward(E, 4, verdict),
        ended(E, 5, "success" if verdict == "pass" else "failure"),
    ]


def test_complete_episode_row() -> None:
    state = fold_episode(E, typed(*full_episode()))
    row = episode_row(state)
    assert row["completeness"] == "complete" and row["status"] == "success"
    assert (row["num_events"], row["max_seq"], row["missing_seqs"]) == (6, 5, [])
    assert (row["num_model_calls"], row["num_tool_calls"]) == (1, 1)
    assert (row["prompt_tokens"], row["completion_tokens"]) == (10, 2)
    assert row["task_id"] == "t1" and row["policy_version"] == "3" and row["group_id"] == "g"
    assert row["duration_s"] == 5.0
    assert [r["seq"] for r in step_rows(state)] == list(range(6))
    assert failure_rows(state) == []


def test_order_of_arrival_and_duplicates_do_not_matter() -> None:
    docs = full_episode("fail")
    events = typed(*docs)
    expected = (
        episode_row(fold_episode(E, events)),
        step_rows(fold_episode(E, events)),
        reward_rows(fold_episode(E, events)),
        failure_rows(fold_episode(E, events)),
    )
    rng = random.Random(3)
    for _ in range(20):
        shuffled = events + rng.sample(events, 3)  # re-sent duplicates
        rng.shuffle(shuffled)
        st = fold_episode(E, shuffled)
        assert (episode_row(st), step_rows(st), reward_rows(st), failure_rows(st)) == expected


def test_open_and_gap_and_late_fix_up() -> None:
    docs = full_episode()
    assert episode_row(fold_episode(E, typed(*docs[:4])))["completeness"] == "open"
    gap = episode_row(fold_episode(E, typed(*(docs[:2] + docs[3:]))))
    assert gap["completeness"] == "gap" and gap["missing_seqs"] == [2]
    assert episode_row(fold_episode(E, typed(*docs)))["completeness"] == "complete"


def test_latest_reward_per_judge_version_wins_and_rejudge_is_not_a_step() -> None:
    docs = full_episode("fail")
    late = T0 + dt.timedelta(days=1)
    docs.append(reward(E, 0, "pass", version="v1", source="rejudge", ts=late))  # re-judged later
    docs.append(reward(E, 0, "fail", version="v2", source="rejudge", ts=late, score=0.25))
    state = fold_episode(E, typed(*docs))
    rows = {(r["judge_version"]): r for r in reward_rows(state)}
    assert rows["v1"]["verdict"] == "pass" and rows["v1"]["source"] == "rejudge"
    assert rows["v2"]["score"] == 0.25
    assert episode_row(state)["completeness"] == "complete"  # rejudge seqs do not count
    assert len(step_rows(state)) == 6
    fails = failure_rows(state)
    assert [(f["judge_version"], f["category"]) for f in fails] == [("v2", "test_failure")]


@pytest.mark.parametrize(
    ("docs", "category", "failing_seq"),
    [
        (
            [
                started(E),
                call(E, 1),
                result(E, 2, exit_code=1, stdout="FAILED t - AssertionError: x"),
                reward(E, 3, "fail"),
                ended(E, 4, "failure"),
            ],
            "test_failure",
            2,
        ),
        (
            [
                started(E),
                call(E, 1),
                result(E, 2, exit_code=None, timed_out=True, stdout="sleeping"),
                reward(E, 3, "fail"),
                ended(E, 4, "failure"),
            ],
            "timeout",
            2,
        ),
        ([started(E), model(E, 1), ended(E, 2, "truncated", reason="max_steps=1 reached")], "max_steps", 2),
        ([started(E), model(E, 1), ended(E, 2, "truncated", reason="time limit 60s")], "timeout", 2),
        (
            [
                started(E),
                call(E, 1, tool="bsh"),
                result(E, 2, exit_code=None, error_kind="unknown_tool"),
                reward(E, 3, "fail"),
                ended(E, 4, "failure"),
            ],
            "format_error",
            2,
        ),
        (
            [started(E), model(E, 1, finish_reason="length"), reward(E, 2, "fail"), ended(E, 3, "failure")],
            "format_error",
            1,
        ),
        (
            [started(E), reward(E, 1, "fail", flags=["reward_hack_suspected"]), ended(E, 2, "failure")],
            "reward_hack_suspected",
            1,
        ),
        ([started(E), sandbox(E, 1, "crashed", "OOM killed"), ended(E, 2, "infra_error")], "infra_error", 1),
        ([started(E), reward(E, 1, "error"), ended(E, 2, "infra_error")], "infra_error", 1),
        (
            [
                started(E),
                call(E, 1),
                result(E, 2, exit_code=2, stderr="ls: cannot access 'x'"),
                ended(E, 3, "failure"),
            ],
            "tool_error",
            2,
        ),
    ],
)
def test_failure_categories(docs: list, category: str, failing_seq: int) -> None:  # type: ignore[type-arg]
    [row] = failure_rows(fold_episode(E, typed(*docs)))
    assert (row["category"], row["failing_seq"]) == (category, failing_seq)
    assert row["signature"].startswith(category + ": ")


def test_test_failure_evidence_names_the_failed_tests() -> None:
    docs = [
        started(E),
        reward(
            E,
            1,
            "fail",
            evidence={
                "tests": [{"name": "test_a", "outcome": "passed"}, {"name": "test_b", "outcome": "failed"}]
            },
        ),
        ended(E, 2, "failure"),
    ]
    [row] = failure_rows(fold_episode(E, typed(*docs)))
    assert row["category"] == "test_failure" and "test_b" in row["message"]


def test_a_composite_judges_failed_tests_name_the_failure_in_any_run_order() -> None:
    """The tests judge writes ``status``; a composite nests each component's evidence by name."""

    def row_of(tests: list[dict[str, str]]) -> dict:  # type: ignore[type-arg]
        evidence = {
            "correctness": {"tests": tests, "bridge": {"connected": True}},
            "efficiency": {"score": 1},
        }
        docs = [started(E), reward(E, 1, "fail", evidence=evidence), ended(E, 2, "failure")]
        [row] = failure_rows(fold_episode(E, typed(*docs)))
        return row

    tests = [{"name": f"t::gen[{i}]", "status": "failed"} for i in range(7)]
    tests += [{"name": "t::ok", "status": "passed"}, {"name": "t::boom", "status": "error"}]
    a = row_of(tests)
    assert a["category"] == "test_failure" and "t::boom" in a["message"] and "t::ok" not in a["message"]
    assert a["message"].endswith("and 3 more")
    b = row_of(list(reversed(tests)))  # another run order: the same failure
    assert a["signature"] == b["signature"] != "test_failure: verdict fail, score <n>"
    c = row_of([{"name": "t::gen[3]", "status": "failed"}])
    assert c["signature"] != a["signature"]
    # two components failing the same test name it once; a null status falls back to outcome
    evidence = {"correctness": {"tests": [{"name": "t::z", "status": "failed"}]},
                "regression": {"tests": [{"name": "t::a", "status": None, "outcome": "failed"},
                                         {"name": "t::z", "status": "failed"}]}}  # fmt: skip
    docs = [started(E), reward(E, 1, "fail", evidence=evidence), ended(E, 2, "failure")]
    [row] = failure_rows(fold_episode(E, typed(*docs)))
    assert row["message"] == "failed: t::a, t::z"


def test_no_failure_row_for_passing_or_unjudged_successes() -> None:
    assert failure_rows(fold_episode(E, typed(*full_episode("pass")))) == []
    assert failure_rows(fold_episode(E, typed(started(E), ended(E, 1, "success")))) == []
    [row] = failure_rows(fold_episode(E, typed(started(E), ended(E, 1, "failure"))))
    assert row["judge_name"] == "-"


def test_signatures_cluster_across_paths_numbers_and_addresses() -> None:
    a = normalise_error('Traceback...\n  File "/tmp/run-81/calc.py", line 12\nAssertionError: assert 6 == 5')
    b = normalise_error('Traceback...\n  File "/work/x/calc.py", line 99\nAssertionError: assert 10 == 3')
    assert a == b == "AssertionError: assert <n> == <n>"
    c = normalise_error(
        "TypeError: object at 0x7f3a2c1d0 is not callable; id 01a2294a-ed13-70f8-ae32-ab7969800482"
    )
    assert c == "TypeError: object at <addr> is not callable; id <uuid>"
    assert normalise_error("KeyError: 'alpha'") == normalise_error('KeyError: "beta"')
    assert normalise_error("") == "<empty>"


def test_a_pathological_error_line_does_not_stall_the_fold() -> None:
    """An agent's tool output of one long run of slashes: the path pattern backtracks quadratically.

    100k slashes took minutes per episode before the line was cut; the fold runs in a child with a
    timeout a hundred times what it needs, so a regression fails instead of hanging the suite.
    """
    import subprocess
    import sys

    code = (
        "from tests.pipelines.factories import *\n"
        "from pipelines import failure_rows, fold_episode\n"
        "E = 'ep-slashes'\n"
        "docs = [started(E), call(E, 1), result(E, 2, exit_code=1, stderr='x' + '/' * 100_000), "
        "ended(E, 3, 'failure')]\n"
        "[row] = failure_rows(fold_episode(E, typed(*docs)))\n"
        "print(row['signature'][:40])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("tool_error: ")
    assert normalise_error("x" + "/" * 100_000) == normalise_error("x" + "/" * 999)
