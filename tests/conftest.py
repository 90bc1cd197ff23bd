"""Shared fixtures: a real Kafka broker started by the test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka, listen_port

pytest_plugins = ["tests.sandbox_fixtures"]

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TRAJLAKE_SHARED_DIR", REPO.parent / "shared"))
"""The project's shared folder (beside the checkout; ``TRAJLAKE_SHARED_DIR`` for a clone elsewhere)."""
FIXTURES = SHARED / "fixtures" / "trajectories"


def free_port() -> int:
    """A free loopback port below the ephemeral range (see :func:`ingest.kafka_broker.listen_port`)."""
    return listen_port()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    """One real single-node KRaft broker for the whole session (topics: 8 partitions)."""
    home = tmp_path_factory.mktemp("kafka-home")
    broker = EmbeddedKafka(home, f"127.0.0.1:{free_port()}", heap="512m")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[EmbeddedKafka]:
    """A broker of its own, for tests that stop, kill or corrupt it."""
    broker = EmbeddedKafka(tmp_path / "home", f"127.0.0.1:{free_port()}", heap="384m")
    try:
        yield broker
    finally:
        broker.stop(timeout_s=20)


@pytest.fixture
def topic(kafka: EmbeddedKafka, request: pytest.FixtureRequest) -> str:
    """A fresh topic (8 partitions) on the session broker, named after the test."""
    test = (f"{request.cls.__name__}." if request.cls else "") + request.node.name  # (a contract's classes)
    name = "t." + test.replace("[", ".").replace("]", "")[:150] + f".{os.getpid()}"
    broker = EmbeddedKafka(kafka.home, kafka.bootstrap, topics={name: 8})
    broker.ensure_topics()
    return name


@pytest.fixture
def topics_env(kafka: EmbeddedKafka, request: pytest.FixtureRequest) -> dict[str, str]:
    """Environment for a ``trajlake`` command on the session broker with topics of its own.

    Every topic the settings name (episodes, judgements, learner, tasks, curation) is fresh, so a
    command that folds the log folds only what this test produced.
    """
    base = "t." + request.node.name.replace("[", ".").replace("]", "")[:120] + f".{os.getpid()}"
    names = {kind: f"{base}.{kind}" for kind in ("episodes", "judgements", "learner", "tasks", "curation")}
    parts = {"episodes": 4, "judgements": 4, "learner": 1, "tasks": 1, "curation": 1}
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={n: parts[k] for k, n in names.items()}).ensure_topics()
    return {
        "TRAJLAKE_KAFKA_BOOTSTRAP": kafka.bootstrap,
        **{f"TRAJLAKE_TOPIC_{kind.upper()}": name for kind, name in names.items()},
    }


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave with the session's status once every report is written, skipping native teardown.

    The session runs Arrow, the Delta runtime and gRPC in-process; their thread pools now and then
    abort the interpreter's final teardown with ``std::terminate`` (SIGABRT), which would turn a
    finished, reported session into a failed one. The CLI leaves the same way (``trajlake.cli``).
    """
    if not _EXIT_STATUS or os.environ.get("TRAJLAKE_TEST_NORMAL_EXIT"):
        return
    import atexit
    import sys

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(_EXIT_STATUS[-1])
