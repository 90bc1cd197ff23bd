"""Generated checks: questions drawn at judge time, answered by the reference, asked of the agent's code."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from judges import JudgeContext, build_judge, load_task
from judges.generated import (
    OUTCOME_SOURCE,
    GeneratedCheckError,
    bridge_cases,
    input_sets,
    preview_bridge,
    seed_for,
)
from judges.host_run import use_secret
from judges.judgement import Judgement
from judges.replay import replay
from sandboxes import SandboxBackend, SandboxSpec

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _outcome_fns() -> dict[str, object]:
    ns: dict[str, object] = {}
    exec(OUTCOME_SOURCE, ns)  # noqa: S102 - the judge's own comparison code, as the generated test runs it
    return ns


def test_the_seed_is_the_hosts_secret_and_the_task() -> None:
    a, b = load_task(TASKS / "pyfix" / "pyfix-001"), load_task(TASKS / "pyfix" / "pyfix-002")
    with use_secret(b"one host"):
        s1 = seed_for(a)
        assert s1 == seed_for(a) and s1 != seed_for(b)
    with use_secret(b"another host"):
        assert seed_for(a) != s1


def test_cases_are_drawn_and_answered_the_same_for_one_seed() -> None:
    task = load_task(TASKS / "pyfix" / "pyfix-013")
    first = bridge_cases(task, 7, cached=False)
    assert first == bridge_cases(task, 7, cached=False) and len(first.cases) == 40
    assert first.cases != bridge_cases(task, 8, cached=False).cases
    # the untouched package answers some of them as the reference does, not all
    _, oks = preview_bridge(task, 7, task.initial_dir.resolve())
    assert 0 < sum(oks) < len(oks)


def test_a_generator_that_returns_objects_is_the_tasks_fault(tmp_path: Path) -> None:
    family = tmp_path / "pyfix"
    shutil.copytree(TASKS / "pyfix" / "pyfix-001", family / "pyfix-001")
    shutil.copy(TASKS / "pyfix" / "family.yaml", family / "family.yaml")
    gen = family / "pyfix-001" / "generator.py"
    gen.write_text(gen.read_text() + "\n\ndef call(case):\n    return object()\n")
    with pytest.raises(GeneratedCheckError, match="return plain data"):
        bridge_cases(load_task(family / "pyfix-001"), 1, cached=False)


@pytest.mark.parametrize(
    ("expected", "actual", "same"),
    [
        (("value", [1, 2]), ("value", [1, 2]), True),
        (("value", [1, 2]), ("value", (1, 2)), False),
        (("raises", ["ValueError", "Exception", "BaseException", "object"]),
         ("raises", ["SlugError", "ValueError", "Exception", "BaseException", "object"]), True),
        # the package's own error class, raised by the reference: the same name, or its built-in base
        (("raises", ["SlugError", "ValueError", "Exception", "BaseException", "object"]),
         ("raises", ["ValueError", "Exception", "BaseException", "object"]), True),
        # a base no more specific than Exception says nothing: any error would match it
        (("raises", ["CycleError", "Exception", "BaseException", "object"]),
         ("raises", ["KeyError", "LookupError", "Exception", "BaseException", "object"]), False),
        (("raises", ["ValueError", "Exception", "BaseException", "object"]), ("value", None), False),
    ],
)  # fmt: skip
def test_outcomes_compare_by_value_or_by_the_exception_raised(
    expected: tuple[str, object], actual: tuple[str, object], same: bool
) -> None:
    assert _outcome_fns()["same_outcome"](expected, actual) is same  # type: ignore[operator]


def test_input_sets_follow_the_seed() -> None:
    task = load_task(TASKS / "datawrangle" / "datawrangle-001")
    a = input_sets(task, 3, cached=False)
    assert a == input_sets(task, 3, cached=False) and len(a.sets) == 3
    assert a.inputs == ["data/sales.csv"] and a.outputs == ["out/region_totals.json"]
    assert a.sets[0] != input_sets(task, 4, cached=False).sets[0]


def _judge(backend: SandboxBackend, image: str, task_dir: Path, actions: list[object]) -> Judgement:
    task = load_task(task_dir)
    with backend.create(SandboxSpec(image=image, workspace=task.initial_dir)) as sb:
        task.prepare(sb)
        traj = replay(task, sb, actions)
        return build_judge({"name": "tests"})(JudgeContext(task=task, sandbox=sb, events=traj.events))


@pytest.mark.parametrize(
    ("procedure", "why"),
    [
        ("while :; do :; done\n", "ran past 2s"),
        ("mkdir -p out && ln -s /etc/passwd out/region_totals.json\n", "cannot be read"),
        # what the agent's own run left in /tmp is gone when the judge runs the procedure
        ("cp /tmp/stash.json out/region_totals.json\n", "differs from the reference"),
    ],
)
def test_a_procedure_that_loops_links_out_or_leans_on_tmp_fails_never_errors(
    local_backend: SandboxBackend, base_image: str, tmp_path: Path, procedure: str, why: str
) -> None:
    family = tmp_path / "datawrangle"
    shutil.copytree(TASKS / "datawrangle" / "datawrangle-001", family / "datawrangle-001")
    text = (TASKS / "datawrangle" / "family.yaml").read_text()
    (family / "family.yaml").write_text(text.replace("timeout_s: 60", "timeout_s: 2"))
    actions = ["apply_reference", {"bash": "cp out/region_totals.json /tmp/stash.json"},
               {"write_file": {"path": "solve.sh", "content": f"mkdir -p out\n{procedure}"}}]  # fmt: skip
    j = _judge(local_backend, base_image, family / "datawrangle-001", actions)
    assert j.verdict == "fail" and j.score == 0.0, j
    messages = " ".join(t.get("message") or "" for t in j.evidence["tests"])  # type: ignore[union-attr]
    assert why in messages, messages
