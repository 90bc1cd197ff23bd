"""A real lake for the API tests: the story produced to the session broker and folded by the pipeline."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api import create_app
from ingest.kafka_broker import EmbeddedKafka
from lake import Lake
from pipelines import PipelineConfig, run_once
from schemas.codec import serialize_event
from tests.api.lake_story import Story, checkpoint_events, make_story
from tests.pipelines.log_workload import produce


@dataclass
class StoryLake:
    """The built lake and what it should hold."""

    root: Path
    story: Story
    after_batch1: dict[str, int]
    """Delta version of every table after the first batch."""
    after_batch2: dict[str, int]
    checkpoints: list[str]


def _records(topic: str, docs: list[dict]) -> list[tuple[str, bytes, bytes]]:  # type: ignore[type-arg]
    return [(topic, d["episode_id"].encode(), json.dumps(d).encode()) for d in docs]


@pytest.fixture(scope="module")
def story_lake(
    kafka: EmbeddedKafka, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> StoryLake:
    # topics of the module's own: each module's lake holds one story, not those of the modules before
    module = request.module.__name__.rsplit(".", 1)[-1]
    topic = f"api.story.{module}.{os.getpid()}"
    learner = f"api.story.learner.{module}.{os.getpid()}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 8, learner: 1}).ensure_topics()
    root = tmp_path_factory.mktemp("api-lake") / "lake"
    cfg = PipelineConfig(
        bootstrap=kafka.bootstrap,
        lake_root=str(root),
        topics=(topic, learner),
        control_topics={"checkpoint": learner},
        worker_log=str(root.parent / "workers.log"),
    )
    story = make_story()
    # the checkpoints are control streams on the learner topic: one with each batch
    parent, child = checkpoint_events(root)
    ck = [(learner, e.episode_id.encode(), serialize_event(e)) for e in (parent, child)]
    produce(kafka.bootstrap, _records(topic, story.batch1) + ck[:1])
    assert len(run_once(cfg)) == 1
    after1 = Lake(root).versions()
    produce(kafka.bootstrap, _records(topic, story.batch2) + ck[1:])
    assert len(run_once(cfg)) == 1
    after2 = Lake(root).versions()
    return StoryLake(root, story, after1, after2, ["ck-parent", "ck-child"])


@pytest.fixture(scope="module")
def client(story_lake: StoryLake) -> Iterator[TestClient]:
    with TestClient(create_app(story_lake.root)) as c:
        yield c
