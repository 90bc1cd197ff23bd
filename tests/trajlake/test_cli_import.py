"""``trajlake import`` is idempotent: the same file twice adds no episode (a real broker, pipeline and lake).

A file imports under ids derived from its format and content. The second import is skipped
by this home's ledger, or by the lake once the pipeline folded the first; a copy sent anyway (a
home with no ledger and another lake) carries the same event ids, and the pipeline keeps one.
Directories are walked; what in them is no trajectory is skipped and counted.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from importers.report import SourceFile, import_episode_id
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from tests.conftest import FIXTURES
from tests.trajlake.test_cli import run

pytestmark = pytest.mark.kafka


def topics_env(kafka: EmbeddedKafka) -> dict[str, str]:
    names = ("EPISODES", "JUDGEMENTS", "LEARNER", "TASKS", "CURATION")
    env = {f"TRAJLAKE_TOPIC_{n}": f"import.{n.lower()}.{os.getpid()}" for n in names}
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics=dict.fromkeys(env.values(), 4)).ensure_topics()
    return env


def log_count(home: Path, port: int, env: dict[str, str]) -> int:
    out = run(home, port, "events", "read", "--limit", "100000", env=env).stdout
    return len(out.splitlines())


def test_importing_the_same_files_again_adds_nothing(kafka: EmbeddedKafka, tmp_path: Path) -> None:
    port = int(kafka.bootstrap.rsplit(":", 1)[1])
    env = topics_env(kafka)
    home = tmp_path / "h"
    folder = tmp_path / "runs"
    (folder / "nested").mkdir(parents=True)
    shutil.copy(FIXTURES / "openhands" / "basic.json", folder / "basic.json")
    shutil.copy(FIXTURES / "mini-swe-agent" / "local.traj.json", folder / "nested" / "local.traj.json")
    traj = Path(__file__).resolve().parents[1] / "fixtures" / "trajectories" / "swe-agent"
    shutil.copy(traj / "swe-agent__test-repo-i1.traj", folder / "nested" / "run.traj")
    (folder / "notes.txt").write_text("not a trajectory")
    expected = {
        import_episode_id("openhands", SourceFile.read(folder / "basic.json").sha256),
        import_episode_id("mini-swe-agent", SourceFile.read(folder / "nested" / "local.traj.json").sha256),
        import_episode_id("swe-agent", SourceFile.read(folder / "nested" / "run.traj").sha256),
    }

    first = run(home, port, "import", "--json", str(folder), env=env)
    reports = [json.loads(line) for line in first.stdout.splitlines()]
    assert {r["episode_id"] for r in reports} == expected and not any("skipped" in r for r in reports)
    assert "skipped 1 files of no known trajectory format" in first.stderr
    sent = log_count(home, port, env)
    assert sent == sum(sum(r["events"].values()) for r in reports)

    # again, the folder and a file of it: this home's ledger knows both; nothing is sent
    again = run(home, port, "import", "--json", str(folder), str(folder / "basic.json"), env=env)
    skipped = [json.loads(line) for line in again.stdout.splitlines()]
    assert {r["episode_id"] for r in skipped} == expected
    assert all("already imported" in r["skipped"] for r in skipped)
    assert log_count(home, port, env) == sent

    # folded; with the ledger gone, the lake knows them
    run(home, port, "pipeline", "run", "--once", env=env)
    lake = Lake(str(home / "lake"))
    assert set(lake.read("episodes", columns=["episode_id"])["episode_id"].to_pylist()) == expected
    (home / "imports" / "ledger.jsonl").unlink()
    run(home, port, "import", str(folder), env=env)
    assert log_count(home, port, env) == sent

    # another home (no ledger, another lake) sends them again, under the same ids: the first
    # lake folds the copies into nothing new
    other = tmp_path / "other"
    copy = run(other, port, "import", "--json", str(folder), env=env)
    assert {json.loads(line)["episode_id"] for line in copy.stdout.splitlines()} == expected
    assert log_count(home, port, env) == 2 * sent
    steps_before = lake.read("steps", columns=["episode_id"]).num_rows
    run(home, port, "pipeline", "run", "--once", env=env)
    assert set(lake.read("episodes", columns=["episode_id"])["episode_id"].to_pylist()) == expected
    assert lake.read("steps", columns=["episode_id"]).num_rows == steps_before
    # the copies are byte for byte the first ones where the source has its times (an import's
    # producer has no pid): re-sends, dropped. Where it has none (mini-swe-agent, SWE-agent), the
    # envelope's time is the import's, so those copies differ and are quarantined as conflicts
    quarantine = lake.read("quarantine", columns=["error"])["error"].to_pylist()
    assert all("already names another event" in e for e in quarantine)
    timeless = [r for r in reports if r["format"] in ("mini-swe-agent", "swe-agent")]
    assert len(quarantine) == sum(sum(r["events"].values()) for r in timeless)
