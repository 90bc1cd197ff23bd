"""The closed loop, wired: rollouts -> log -> Beam -> Delta -> learner -> checkpoint -> rollouts.

Composition only: settings in, each phase's package called (``rollouts``,
``pipelines``, ``learners``); the phases talk through the log, the tables and
checkpoint files, never directly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from judges.tasks import Task
from rollouts import EpisodeOutcome, RolloutConfig, group_assignments, run_rollouts

if TYPE_CHECKING:
    from trajlake.settings import Settings


def rollout_config(
    settings: Settings, policy_spec: str, *, workers: int, metadata: dict[str, Any] | None = None
) -> RolloutConfig:
    """A rollout configuration from the settings."""
    return RolloutConfig(
        bootstrap=settings.kafka_bootstrap,
        home=str(settings.home),
        topic=settings.topic_episodes,
        policy_factory="trajlake.policy_specs:make_policy",
        policy_spec=policy_spec,
        sandbox_backend=settings.sandbox_backend,
        sandbox_config=settings.sandbox_config(),
        workers=workers,
        metadata=metadata or {},
    )


def rollout(
    settings: Settings,
    tasks: Sequence[Task],
    policy_spec: str,
    *,
    group_size: int,
    workers: int,
    tag: str,
    seed: int = 0,
    source: str = "rollout",
    on_outcome: Callable[[EpisodeOutcome], None] | None = None,
) -> list[EpisodeOutcome]:
    """``group_size`` attempts at every task, over ``workers`` processes; groups are tagged ``tag``.

    ``source="eval"`` records them as an evaluation's episodes (``episodes.source``): never trained on.
    """
    assignments = group_assignments(tasks, group_size, rng=random.Random(seed), tag=tag)
    cfg = rollout_config(settings, policy_spec, workers=workers, metadata={"tag": tag, "source": source})
    return run_rollouts(cfg, assignments, on_outcome=on_outcome)


def fold_log(settings: Settings) -> int:
    """Run the Beam pipeline over everything new in the log; return records folded."""
    from pipelines import run_once

    return sum(r.records for r in run_once(settings.pipeline_config()))


def curate(settings: Settings, events: Sequence[Any]) -> None:
    """Put control events on the curation topic (acknowledged) and fold them into the lake.

    Raises:
        SinkUnavailableError: no broker answers, or the topic is missing (with the fix).
    """
    from ingest.kafka_broker import require_broker, require_topic
    from ingest.publish import publish_events

    require_broker(settings.kafka_bootstrap)
    require_topic(settings.kafka_bootstrap, settings.topic_curation)
    publish_events(settings.kafka_bootstrap, settings.topic_curation, list(events))
    fold_log(settings)
