"""Formats come from entry points: a package of a user's own adds one, and a broken one is left out.

The plug-in here is a real installed distribution as Python finds one (a ``.dist-info`` with an
``entry_points.txt`` on ``sys.path``), read by ``importlib.metadata`` like any other.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import importers
from ingest import EpisodeRecorder, MemorySink
from schemas import parse_event

PLUGIN = """
from importers import TrajectoryFormat
from importers.report import ImportReport, ReportingEpisode, SourceFile


def looks_like(data):
    return isinstance(data, dict) and isinstance(data.get("toy_steps"), list)


def import_toy(path, recorder, *, episode_id=None):
    source = SourceFile.read(path)
    steps = source.data["toy_steps"]
    report = ImportReport(source=source.path, format="toy", sha256=source.sha256, source_items=len(steps))
    episode_id, event_ids = source.ids("toy", None, episode_id)
    with recorder.episode(task={"id": "toy-task", "family": "imported/toy"}, policy={"id": "toy"},
                          episode_id=episode_id, event_ids=event_ids,
                          metadata=source.metadata(recorder, "toy")) as episode:
        ep = ReportingEpisode(episode, report, "toy")
        for i, command in enumerate(steps):
            call_id = ep.tool_call(i, "bash", {"command": command})
            ep.tool_result(i, call_id, exit_code=0, stdout=command.upper())
        ep.end("success", reason="the toy ran every step")
    return report


TRAJECTORY_FORMAT = TrajectoryFormat(name="toy", looks_like=looks_like, import_file=import_toy)
BROKEN = TrajectoryFormat(name="not-its-name", looks_like=looks_like, import_file=import_toy)
"""


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Path]:
    site = tmp_path / "site"
    (site / "toy_trajectories").mkdir(parents=True)
    (site / "toy_trajectories" / "__init__.py").write_text(PLUGIN)
    info = site / "toy_trajectories-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-trajectories\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[trajlake.importers]\n"
        "toy = toy_trajectories:TRAJECTORY_FORMAT\n"
        "misnamed = toy_trajectories:BROKEN\n"
        "missing = toy_trajectories_gone:TRAJECTORY_FORMAT\n"
    )
    sys.path.insert(0, str(site))
    importers.formats.cache_clear()
    yield site
    sys.path.remove(str(site))
    sys.modules.pop("toy_trajectories", None)
    importers.formats.cache_clear()


def test_a_package_registers_a_format_and_imports_with_it(
    plugin: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="importers"):
        known = importers.formats()
    assert {"mini-swe-agent", "openhands", "swe-agent", "toy"} <= set(known)
    assert "misnamed" not in known and "missing" not in known  # left out, each with a warning
    assert "toy_trajectories_gone" in caplog.text and "not a TrajectoryFormat named 'misnamed'" in caplog.text
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"toy_steps": ["ls", "pwd"]}))
    assert importers.detect_format(path) == "toy"
    sink = MemorySink()
    rec = EpisodeRecorder.open(bootstrap="unused", home=tmp_path / "h", worker_id="t", sink=sink)
    try:
        report = importers.import_file(path, rec)
        rec.flush(timeout=10)
    finally:
        rec.close()
    events = [parse_event(v) for v in sink.values()]
    assert report.format == "toy" and report.unaccounted() == []
    assert [e.type for e in events] == ["episode_started", *["tool_call", "tool_result"] * 2, "episode_ended"]


def test_without_the_package_the_format_is_unknown(tmp_path: Path) -> None:
    importers.formats.cache_clear()
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"toy_steps": ["ls"]}))
    with pytest.raises(importers.ImportFormatError, match="no known trajectory format"):
        importers.detect_format(path)
