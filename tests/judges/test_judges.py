"""Judges: versions from code and config, rebuilding from a reward's spec, error vs fail, evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from judges import JudgeConfigError, JudgeContext, build_judge, judge_names, load_task
from judges.builtin.process import _write_targets, is_test_file
from judges.junit import parse_junit
from judges.registry import Judge, JudgeConfig, Outcome
from judges.replay import Trajectory, replay
from sandboxes import SandboxBackend, SandboxSpec
from schemas.events import RewardPayload

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def test_builtin_judges_are_registered() -> None:
    assert {"tests", "static", "assertions", "process", "efficiency", "composite"} <= set(judge_names())


def test_version_follows_configuration_not_instances() -> None:
    a, b = build_judge({"name": "tests"}), build_judge({"name": "tests", "config": {}})
    assert a.version == b.version and len(a.version) == 16
    c = build_judge({"name": "tests", "config": {"timeout_s": 5}})
    assert c.version != a.version


def test_version_follows_code() -> None:
    class Lenient(Judge):
        name = "lenient-test-judge"

        def _judge(self, ctx: JudgeContext) -> Outcome:
            return Outcome(1.0, "pass")

    class Strict(Judge):
        name = "lenient-test-judge"

        def _judge(self, ctx: JudgeContext) -> Outcome:
            return Outcome(0.0, "fail")

    # same name, same (empty) config, different code in different modules -> the module source decides
    Strict.__module__ = "judges.builtin.process"
    assert Lenient().version != Strict().version


def test_composite_version_changes_with_a_sub_judge() -> None:
    spec = load_task(TASKS / "pyfix" / "pyfix-001").spec.judge.model_dump()
    base = build_judge(spec)
    spec["config"]["components"][0]["judge"] = {"name": "tests", "config": {"timeout_s": 7}}
    assert build_judge(spec).version != base.version


def test_bad_specs_are_clear_errors() -> None:
    with pytest.raises(JudgeConfigError, match="unknown judge 'nope'"):
        build_judge({"name": "nope"})
    with pytest.raises(JudgeConfigError, match="timeout_s"):
        build_judge({"name": "tests", "config": {"timeout_s": "soon"}})
    with pytest.raises(JudgeConfigError, match="bogus"):
        build_judge({"name": "static", "config": {"bogus": 1}})


def test_reward_event_rebuilds_the_exact_judge(local_backend: SandboxBackend, base_image: str) -> None:
    task = load_task(TASKS / "pyfix" / "pyfix-001")
    judge = build_judge(task.spec.judge)
    with local_backend.create(SandboxSpec(image=base_image, workspace=task.initial_dir)) as sb:
        task.prepare(sb)
        traj = replay(task, sb, ["apply_reference"])
        j = judge(JudgeContext(task=task, sandbox=sb, events=traj.events))
    payload = j.to_payload()  # the payload of the `reward` event it becomes
    assert RewardPayload.model_validate(payload.model_dump()) == payload
    rebuilt = build_judge(payload.judge_spec)
    assert rebuilt.version == payload.judge_version == judge.version
    assert payload.verdict == "pass" and payload.score == 1.0
    tests = payload.evidence["correctness"]["tests"]  # type: ignore[index]
    assert tests and all(t["status"] == "passed" for t in tests)  # type: ignore[index]


def test_a_judge_that_cannot_run_says_error_not_fail(local_backend: SandboxBackend, base_image: str) -> None:
    task = load_task(TASKS / "pyfix" / "pyfix-001")
    sb = local_backend.create(SandboxSpec(image=base_image, workspace=task.initial_dir))
    sb.close()  # the sandbox is gone: the judge cannot look at anything
    for name in ("tests", "static", "process"):
        j = build_judge({"name": name})(JudgeContext(task=task, sandbox=sb, events=Trajectory(task).events))
        assert j.verdict == "error" and j.score == 0.0, (name, j)
        assert "sandbox" in (j.detail or ""), j.detail


class _Broken(Judge):
    name = "broken-for-test"
    Config = JudgeConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        raise ZeroDivisionError("oops")


def test_a_bug_in_a_judge_is_an_error_verdict() -> None:
    j = _Broken()(JudgeContext(task=load_task(TASKS / "pyfix" / "pyfix-001"), sandbox=None))  # type: ignore[arg-type]
    assert j.verdict == "error" and "ZeroDivisionError" in (j.detail or "")


def test_junit_reports_are_parsed() -> None:
    xml = """<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3">
      <testcase classname="tests_hidden.test_a" name="test_ok" time="0.01"/>
      <testcase classname="tests_hidden.test_a" name="test_bad" time="0.02">
        <failure message="assert 1 == 2">x</failure></testcase>
      <testcase classname="tests_hidden.test_a" name="test_skip"><skipped message="later"/></testcase>
    </testsuite></testsuites>"""
    out = parse_junit(xml)
    assert [(o.name.split("::")[1], o.status) for o in out] == [
        ("test_ok", "passed"), ("test_bad", "failed"), ("test_skip", "skipped")
    ]  # fmt: skip
    assert out[1].message == "assert 1 == 2"
    with pytest.raises(ValueError, match="not a JUnit"):
        parse_junit("<html/>")


@pytest.mark.parametrize(
    ("command", "targets"),
    [
        ("echo x > /etc/passwd", ["/etc/passwd"]),
        ("cp -r pkg /usr/lib/python3/dist-packages/", ["/usr/lib/python3/dist-packages/"]),
        ("sed -i 's/a/b/' /opt/app.py", ["/opt/app.py"]),
        ("echo ok > out.txt; cat /etc/hosts", []),
        ("python3 -c \"open('/root/x', 'w').write('1')\"", ["/root/x"]),
        ("mkdir -p /tmp/scratch && cp a /tmp/scratch/", []),
        ("cmd 2>/dev/null > /workspace/log", []),
    ],
)
def test_writes_outside_the_workspace_are_found(command: str, targets: list[str]) -> None:
    assert _write_targets(command) == targets


def test_test_files_are_recognised() -> None:
    assert is_test_file("tests/test_a.py") and is_test_file("test_b.py") and is_test_file("pkg/b_test.py")
    assert not is_test_file("pkg/testing.py") and not is_test_file("contest.py")


def test_a_judge_version_follows_behaviour_not_comments(tmp_path, monkeypatch) -> None:
    import importlib
    import sys

    from judges import registry

    src = 'def score(x):\n    """Half of x."""\n    return x / 2  # halves\n'
    same = '# reworded\ndef score(x):\n    """The half of x, rounded never."""\n\n    return x / 2\n'
    other = 'def score(x):\n    """Half of x."""\n    return x // 2\n'
    assert registry.source_digest(src) == registry.source_digest(same)
    assert registry.source_digest(src) != registry.source_digest(other)
    # and through a real module and a real judge's version
    (tmp_path / "versioned_mod.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))

    class Probe(registry.Judge):
        name = "probe-version"
        Config = registry.JudgeConfig
        code_modules = ("versioned_mod",)

        def _judge(self, ctx):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    def version_with(text: str) -> str:
        (tmp_path / "versioned_mod.py").write_text(text)
        sys.modules.pop("versioned_mod", None)
        importlib.invalidate_caches()
        registry._module_digest.cache_clear()
        return Probe().version

    v1 = version_with(src)
    assert version_with(same) == v1
    assert version_with(other) != v1
