"""Expected failures of the command line: one sentence with the fix, an exit status, never a traceback.

Run as a user would (the installed ``trajlake`` in a subprocess) against what is really missing:
a port nobody listens on, an empty image store, a directory without a lake.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ingest.kafka_broker import EmbeddedKafka
from sandboxes import SandboxBackend, SandboxConfig
from tests.conftest import FIXTURES, free_port
from trajlake.terminal import ExitCode, describe

TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))
REPO = Path(__file__).resolve().parents[2]
WORDPLAY = REPO / "tasks" / "wordplay"
NOT_READY, USAGE, FAILED = int(ExitCode.NOT_READY), int(ExitCode.USAGE), int(ExitCode.FAILED)


def cli(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str]:
    """Run ``trajlake ARGS``; return the status and stdout+stderr (asserting there is no traceback)."""
    e = {
        **os.environ,
        "TRAJLAKE_HOME": str(home),
        "TRAJLAKE_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",  # nobody listens there
        "COLUMNS": "250",
        **(env or {}),
    }
    e.pop("TRAJLAKE_DEBUG", None)
    p = subprocess.run([TRAJLAKE, *args], env=e, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    out = p.stdout + p.stderr
    assert "Traceback" not in out, out
    return p.returncode, out


NO_BROKER = [
    ("events", "read"),
    ("events", "read", "--episode", "nope"),
    ("import", str(FIXTURES / "mini-swe-agent" / "local.traj.json")),
    ("pipeline", "run", "--once"),
    ("replay", "--into", "{tmp}/replayed"),
    ("rollout", "--tasks", str(WORDPLAY / "wordplay-001"), "--policy", "scripted:reference"),
]


@pytest.mark.parametrize("args", NO_BROKER, ids=lambda a: " ".join(a[:2]))
def test_a_missing_broker_is_one_sentence_with_the_fix(tmp_path: Path, args: tuple[str, ...]) -> None:
    start = time.monotonic()
    code, out = cli(tmp_path, *(a.format(tmp=tmp_path) for a in args))
    assert code == NOT_READY, out
    assert "no Kafka broker answers at 127.0.0.1:" in out and "`trajlake up`" in out
    assert time.monotonic() - start < 60, "an unreachable broker is found at once, not after retries"


def test_status_exits_3_without_a_broker_in_both_forms(tmp_path: Path) -> None:
    code, out = cli(tmp_path, "status")
    assert code == NOT_READY and "trajlake up" in out
    code, out = cli(tmp_path, "status", "--json")
    assert code == NOT_READY and json.loads(out.splitlines()[0])["running"] is False


def test_drain_of_a_leftover_spool_without_a_broker_says_so(tmp_path: Path) -> None:
    (tmp_path / "spool" / "gone-worker").mkdir(parents=True)
    code, out = cli(tmp_path, "spool", "drain")
    assert code == NOT_READY and "no Kafka broker answers" in out


LAKE_COMMANDS = [
    ("lake", "versions"),
    ("lake", "show", "episodes"),
    ("lake", "diff", "{tmp}", "{tmp}"),
    ("train",),
    ("lineage", "latest"),
    ("rejudge", "--tasks", str(WORDPLAY)),
]


@pytest.mark.parametrize("args", LAKE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_missing_lake_is_one_sentence_with_the_fix(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, out = cli(tmp_path / "home", *(a.format(tmp=tmp_path) for a in args))
    assert code == NOT_READY, out
    assert "no lake at" in out or "no checkpoints in" in out, out
    assert "trajlake pipeline run --once" in out or "trajlake train" in out, out


BAD_ARGUMENTS = [
    (("lake", "show", "episodes", "--version", "-1"), "--version"),
    (("lake", "show", "episodes", "--limit", "-1"), "--limit"),
    (("lake", "show", "nosuchtable"), "there is no table 'nosuchtable'"),
    (("api", "serve", "--port", "99999"), "--port"),
    (("tasks", "list", "/nonexistent"), "'/nonexistent' does not exist"),
    (("lake", "diff", "/nonexistent", "/tmp"), "'/nonexistent' does not exist"),
    (("rollout", "--tasks", str(WORDPLAY), "--policy", "foo:bar"), "unknown policy kind 'foo'"),
    (("rollout", "--tasks", str(WORDPLAY), "--policy", "scripted:/nonexistent.yaml"), "does not exist"),
    (("rollout", "--tasks", str(WORDPLAY), "--policy", "local:/tmp?temperature=hot"), "temperature"),
    (
        ("rollout", "--tasks", str(WORDPLAY), "--policy", "scripted:reference", "--episodes", "-2"),
        "--episodes",
    ),
    (("rollout", "--tasks", str(WORDPLAY), "--policy", "scripted:reference", "--workers", "0"), "--workers"),
    (("train", "--backend", "tensorflow"), "'tensorflow' is not one of 'torch', 'jax'"),
    (("sandbox", "run", "-b", "nope", "--", "true"), "'nope' is not one of 'local', 'docker'"),
    (("pipeline", "run"), "give exactly one of --once or --follow"),
    (("replay", "--into", "/tmp/x", "--from-time", "yesterday"), "is not an ISO time"),
    (("rejudge", "--tasks", str(WORDPLAY), "--judge", '{"name": "nosuchjudge"}'), "nosuchjudge"),
    (("import", "--format", "json", "x.json"), "--format"),
    (("retract", "--reason", "hack"), "name one thing to retract"),
    (("retract", "--reason", "hack", "--episode", "e", "--group", "g"), "name one thing to retract"),
    (("retract", "--reason", "x", "--task", "no-version"), "a task_version is NAME@VERSION"),
    (("lineage",), "give a CHECKPOINT"),
    (("eval", "--tasks", str(WORDPLAY)), "name the policy to evaluate once"),
    (("eval", "--tasks", str(WORDPLAY), "--samples", "0"), "--samples"),
    (("drift", "--since", "last week"), "neither an ISO 8601 time nor an age"),
    (("review", "queue", "--status", "closed"), "--status is open, reviewed or all"),
    (("judges", "golden", "add"), "--from-reviews"),
]


@pytest.mark.parametrize(
    "args,says", BAD_ARGUMENTS, ids=lambda a: " ".join(a[:3]) if isinstance(a, tuple) else ""
)
def test_bad_arguments_are_refused_by_the_parser(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    code, out = cli(tmp_path, *args)
    assert code == USAGE, out
    assert says in out, out


def test_a_malformed_setting_is_named(tmp_path: Path) -> None:
    code, out = cli(tmp_path, "status", env={"TRAJLAKE_API_PORT": "many"})
    assert code == USAGE and "TRAJLAKE_API_PORT='many' is invalid" in out


def test_a_taken_api_port_is_one_sentence(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code, out = cli(tmp_path, "api", "serve", "--port", str(s.getsockname()[1]))
    assert code == NOT_READY and "cannot listen on 127.0.0.1:" in out and "--port 0" in out


def test_version_and_help() -> None:
    code, out = cli(Path("/tmp"), "--version")
    assert code == 0 and out.startswith("trajlake 0.")
    code, out = cli(Path("/tmp"), "--help")
    assert code == 0 and "doctor" in out and "--debug" in out


def test_debug_flag_and_variable_add_the_traceback(tmp_path: Path) -> None:
    for extra_args, env in ((["--debug"], {}), ([], {"TRAJLAKE_DEBUG": "1"})):
        e = {**os.environ, "TRAJLAKE_HOME": str(tmp_path), "COLUMNS": "250", **env}
        p = subprocess.run(
            [TRAJLAKE, "lake", "versions", *extra_args], env=e, capture_output=True, text=True, timeout=60
        )
        assert p.returncode == NOT_READY
        assert "Traceback" in p.stderr and "TableMissingError" in p.stderr and "no lake at" in p.stderr


def test_an_unexpected_error_is_one_line_and_its_traceback_is_kept(tmp_path: Path) -> None:
    os.environ["TRAJLAKE_HOME"] = str(tmp_path)
    try:
        try:
            {}["boom"]  # noqa: B018 - the bug we report
        except KeyError as exc:
            message, code = describe(exc)
    finally:
        os.environ.pop("TRAJLAKE_HOME")
    assert code == ExitCode.FAILED and "unexpected KeyError" in message and "a bug in trajlake" in message
    saved = Path(message.split("the traceback is in ")[1].split(";")[0])
    assert saved.parent == tmp_path / "logs" and "Traceback" in saved.read_text()


# ---------------------------------------------------------------- a missing base image


def _empty_store(sandbox_config: SandboxConfig, reachable: Path) -> dict[str, str]:
    return {
        "TRAJLAKE_IMAGE_STORE": str(reachable / "images"),
        "TRAJLAKE_SANDBOX_RUNTIME_DIR": str(sandbox_config.runtime_dir),
    }


@pytest.mark.parametrize(
    "args",
    [
        ("sandbox", "run", "-b", "local", "--image", "trajlake-base", "--", "true"),
        ("sandbox", "selftest", "-b", "local", "--image", "trajlake-base", "--check", "exec"),
        ("tasks", "admit", str(WORDPLAY / "wordplay-001")),
        ("judges", "verify", str(REPO / "judges" / "golden" / "static.yaml")),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_an_empty_image_store_stops_with_the_build_command(
    local_backend: SandboxBackend,
    sandbox_config: SandboxConfig,
    tmp_path: Path,
    reachable_tmp: Path,
    args: tuple[str, ...],
) -> None:
    code, out = cli(tmp_path, *args, env=_empty_store(sandbox_config, reachable_tmp))
    assert code == NOT_READY, out
    assert "image 'trajlake-base' is not built yet" in out and "`trajlake sandbox build-image`" in out
    # one sentence, not a table of 1 rejected task
    assert "rejected" not in out


def test_an_image_store_the_sandbox_user_cannot_reach_is_named(
    local_backend: SandboxBackend, sandbox_config: SandboxConfig, tmp_path: Path
) -> None:
    import tempfile

    private = Path(tempfile.mkdtemp(dir=tmp_path))  # 0700, as mktemp -d makes it
    env = {"TRAJLAKE_IMAGE_STORE": str(private / "images"),
           "TRAJLAKE_SANDBOX_RUNTIME_DIR": str(sandbox_config.runtime_dir)}  # fmt: skip
    code, out = cli(
        tmp_path, "sandbox", "run", "-b", "local", "--image", "trajlake-base", "--", "true", env=env
    )
    assert code == NOT_READY, out
    flat = " ".join(out.split())  # the console wraps the sentence when the path is long
    assert f"{private} has mode 0700" in flat and f"chmod o+x {private}" in flat


# ---------------------------------------------------------------- doctor


@pytest.mark.kafka
def test_doctor_reports_the_broker_with_its_fix_and_is_ready_when_it_runs(
    local_backend: SandboxBackend, base_image: str, sandbox_config: SandboxConfig, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        "TRAJLAKE_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}",
        "TRAJLAKE_IMAGE_STORE": str(sandbox_config.image_store),
    }
    code, out = cli(tmp_path, "doctor", "--json", env=env)
    report = json.loads(out[: out.rindex("}") + 1])
    rows = {r["name"]: r for r in report["checks"]}
    assert code == NOT_READY and report["ready"] is False
    assert rows["kafka broker"]["status"] == "missing" and rows["kafka broker"]["fix"] == "`trajlake up`"
    assert rows["base image"]["status"] == rows["java"]["status"] == rows["bubblewrap"]["status"] == "ok"
    try:
        code, out = cli(tmp_path, "up", env=env)
        assert code == 0, out
        code, out = cli(tmp_path, "doctor", env=env)
        assert code == 0 and "ready" in out, out
    finally:
        cli(tmp_path, "down", env=env)
    code, out = cli(tmp_path, "doctor", env=env)
    assert code == NOT_READY and "not ready: kafka broker" in out


def test_doctor_names_a_missing_image_and_a_damaged_lake(
    sandbox_config: SandboxConfig, tmp_path: Path, reachable_tmp: Path
) -> None:
    from lake import Lake

    lake = Lake(tmp_path / "lake")
    lake.ensure(["events"])
    (tmp_path / "lake" / "events" / "_delta_log" / "00000000000000000000.json").write_text("{garbage")
    code, out = cli(tmp_path, "doctor", "--json", env=_empty_store(sandbox_config, reachable_tmp))
    rows = {r["name"]: r for r in json.loads(out[: out.rindex("}") + 1])["checks"]}
    assert code == NOT_READY
    assert rows["base image"]["status"] == "missing" and "build-image" in rows["base image"]["fix"]
    assert rows["lake"]["status"] == "missing" and "events" in rows["lake"]["detail"]
    assert "trajlake replay --into" in rows["lake"]["fix"]


# ---------------------------------------------------------------- admission and the demo


@pytest.mark.kafka
def test_admission_reasons_are_whole_and_json_gives_the_rows(
    local_backend: SandboxBackend,
    base_image: str,
    sandbox_config: SandboxConfig,
    tmp_path: Path,
    topics_env: dict[str, str],
) -> None:
    import shutil

    broken = tmp_path / "tasks" / "wordplay"
    shutil.copytree(WORDPLAY / "wordplay-001", broken / "wordplay-001")
    shutil.copy(WORDPLAY / "family.yaml", broken / "family.yaml")
    (broken / "wordplay-001" / "solution.sh").write_text("true\n")  # the reference no longer solves it
    env = {"TRAJLAKE_IMAGE_STORE": str(sandbox_config.image_store),
           "TRAJLAKE_SANDBOX_RUNTIME_DIR": str(sandbox_config.runtime_dir), **topics_env}  # fmt: skip
    code, out = cli(tmp_path / "home", "tasks", "admit", str(broken), "--runs", "1", env=env)
    assert code == FAILED
    line = next(x for x in out.splitlines() if x.startswith("wordplay-001 rejected"))
    assert "passes_reference: the judge gives fail on the reference" in line  # whole, on one line
    assert "1 task(s): passes_reference" in out
    code, out = cli(tmp_path / "home", "tasks", "admit", str(broken), "--runs", "1", "--json", env=env)
    [row] = json.loads(out[: out.rindex("]") + 1])
    assert row["admitted"] is False and row["reasons"][0].startswith("passes_reference: ")


@pytest.mark.kafka
def test_the_demo_stops_at_admission_with_the_distinct_reasons(
    kafka: EmbeddedKafka, local_backend: SandboxBackend, base_image: str, sandbox_config: SandboxConfig,
    tmp_path: Path,
) -> None:  # fmt: skip
    import shutil

    from rich.console import Console

    from judges.errors import AdmissionError
    from trajlake.demo import run_demo
    from trajlake.settings import Settings

    family = tmp_path / "wordplay"
    for task in ("wordplay-001", "wordplay-002", "wordplay-003"):
        shutil.copytree(WORDPLAY / task, family / task)
    shutil.copy(WORDPLAY / "family.yaml", family / "family.yaml")
    for task in ("wordplay-002", "wordplay-003"):
        (family / task / "solution.sh").write_text("true\n")
    settings = Settings(
        home=tmp_path / "home", kafka_bootstrap=kafka.bootstrap, image_store=sandbox_config.image_store,
        sandbox_runtime_dir=sandbox_config.runtime_dir,
    )  # fmt: skip
    with pytest.raises(AdmissionError) as err:
        run_demo(settings, kafka, family_dir=family, console=Console(file=open(os.devnull, "w")))  # noqa: SIM115
    assert "2 of 3 wordplay tasks were rejected, so the demo stops here" in str(err.value)
    assert "2 task(s): passes_reference" in str(err.value)


# ---------------------------------------------------------------- Ctrl-C


@pytest.mark.kafka
def test_ctrl_c_during_rollouts_stops_the_workers_without_a_traceback(
    kafka: EmbeddedKafka, local_backend: SandboxBackend, base_image: str, sandbox_config: SandboxConfig,
    tmp_path: Path,
) -> None:  # fmt: skip
    script = tmp_path / "slow.yaml"
    script.write_text(yaml.safe_dump({"*": [{"bash": "echo started; sleep 60"}]}))
    topic = f"ctrl-c.{os.getpid()}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2}).ensure_topics()
    e = {
        **os.environ,
        "TRAJLAKE_HOME": str(tmp_path / "home"),
        "TRAJLAKE_KAFKA_BOOTSTRAP": kafka.bootstrap,
        "TRAJLAKE_TOPIC_EPISODES": topic,
        "TRAJLAKE_IMAGE_STORE": str(sandbox_config.image_store),
        "TRAJLAKE_SANDBOX_RUNTIME_DIR": str(sandbox_config.runtime_dir),
        "COLUMNS": "200",
    }
    tasks = ["--tasks", str(WORDPLAY / "wordplay-001"), "--tasks", str(WORDPLAY / "wordplay-002")]
    p = subprocess.Popen(
        [TRAJLAKE, "rollout", *tasks, "--policy", f"scripted:{script}", "--episodes", "2",
         "--group-size", "1", "--workers", "2"],
        env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=REPO,
    )  # fmt: skip
    spool = tmp_path / "home" / "spool"
    deadline = time.monotonic() + 120
    # wait until both workers are recording (their spools exist), then Ctrl-C the whole group
    while time.monotonic() < deadline and len(list(spool.glob("rollout-*"))) < 2 and p.poll() is None:
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()
    time.sleep(1.0)  # let the episodes reach their slow step (a sleep here only makes the test stricter)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == int(ExitCode.INTERRUPTED), out + err
    assert "interrupted" in err and "Traceback" not in out + err
    # the episodes in flight ended as aborted, and every recorded event reached the log
    assert not list(spool.glob("*/seg-*.log")), "a stopped worker left events behind"
    from ingest.log_reader import read_events

    ends = [
        r.event for r in read_events(kafka.bootstrap, topic) if r.event and r.event.type == "episode_ended"
    ]
    assert len(ends) == 2 and {e.payload.status for e in ends} == {"aborted"}  # type: ignore[union-attr]
