"""Checkpoints with lineage: weights, and exactly which data and judge produced them.

A checkpoint is a directory ``<root>/<checkpoint_id>/`` holding ``weights.npz``
(the model's parameters by their torch ``state_dict`` names, so either
framework loads them) and ``meta.json``; its lineage (lake location, the Delta
version of every table read, judge name and version, offsets, number of
samples, parent checkpoint, training metrics) is also a row of the
``checkpoints`` table and an ``annotation`` event in the log.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from learners.config import ModelConfig
from learners.errors import CheckpointNotFoundError
from schemas.tables import TABLES


@dataclass
class Lineage:
    """Where a checkpoint's training data came from."""

    lake_uri: str
    """The lake the dataset was read from (``""`` for data from outside the lake)."""
    table_versions: dict[str, int]
    """Delta version of every table read, e.g. ``{"steps": 12, "episodes": 12, "rewards": 12}``."""
    judge_name: str | None
    judge_version: str | None
    num_samples: int
    parent_id: str | None = None
    offsets: dict[str, Any] = field(default_factory=dict)
    """Kafka offsets the tables held (their ``txn`` versions), per topic/partition."""
    metrics: dict[str, Any] = field(default_factory=dict)
    note: str | None = None
    """What else a reader should know (e.g. a supervised warm start on synthetic data)."""


@dataclass
class CheckpointInfo:
    """A saved checkpoint."""

    checkpoint_id: str
    policy_id: str
    backend: str
    path: str
    created_at: str
    config: dict[str, int]
    lineage: Lineage

    @property
    def policy_version(self) -> str:
        """What episodes run by this checkpoint record as their policy version."""
        return self.checkpoint_id

    def row(self) -> dict[str, Any]:
        """The ``checkpoints`` table row."""
        lin = self.lineage
        return {
            "checkpoint_id": self.checkpoint_id,
            "parent_id": lin.parent_id,
            "policy_id": self.policy_id,
            "policy_version": self.policy_version,
            "backend": self.backend,
            "path": self.path,
            "created_at": dt.datetime.fromisoformat(self.created_at),
            "lake_uri": lin.lake_uri,
            "table_versions": json.dumps(lin.table_versions, sort_keys=True),
            "judge_name": lin.judge_name,
            "judge_version": lin.judge_version,
            "offsets": json.dumps(lin.offsets, sort_keys=True),
            "num_samples": lin.num_samples,
            "metrics": json.dumps(
                {**lin.metrics, **({"note": lin.note} if lin.note else {})}, sort_keys=True
            ),
        }


def save_checkpoint(
    root: str | Path,
    *,
    policy_id: str,
    backend: str,
    config: ModelConfig,
    weights: dict[str, np.ndarray],
    lineage: Lineage,
) -> CheckpointInfo:
    """Write weights and metadata under a new checkpoint id (atomically: a temp dir renamed)."""
    stamp = dt.datetime.now(dt.UTC)
    checkpoint_id = f"{policy_id}-{stamp:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    final = Path(root) / checkpoint_id
    tmp = Path(root) / f".{checkpoint_id}.tmp"
    tmp.mkdir(parents=True)
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()}
    np.savez(str(tmp / "weights.npz"), **arrays)  # type: ignore[arg-type]
    info = CheckpointInfo(
        checkpoint_id=checkpoint_id,
        policy_id=policy_id,
        backend=backend,
        path=str(final.resolve()),
        created_at=stamp.isoformat(),
        config=config.to_dict(),
        lineage=lineage,
    )
    (tmp / "meta.json").write_text(json.dumps(asdict(info), indent=2, sort_keys=True))
    os.replace(tmp, final)
    return info


def load_checkpoint(path: str | Path) -> tuple[CheckpointInfo, ModelConfig, dict[str, np.ndarray]]:
    """Metadata, model configuration and weights of a checkpoint directory."""
    p = Path(path)
    meta = json.loads((p / "meta.json").read_text())
    meta["lineage"] = Lineage(**meta["lineage"])
    info = CheckpointInfo(**meta)
    with np.load(p / "weights.npz") as npz:
        weights = {k: npz[k] for k in npz.files}
    return info, ModelConfig.from_dict(info.config), weights


def record_checkpoint(lake: str | Path, info: CheckpointInfo) -> int:
    """Append the checkpoint's row to the ``checkpoints`` table; return the table's new version."""
    uri = str(Path(lake) / "checkpoints") if "://" not in str(lake) else f"{lake}/checkpoints"
    table = pa.Table.from_pylist([info.row()], schema=TABLES["checkpoints"])
    write_deltalake(uri, table, mode="append")
    return int(DeltaTable(uri).version())


def read_checkpoints(lake: str | Path) -> dict[str, dict[str, Any]]:
    """Every row of the ``checkpoints`` table, by checkpoint id (empty when there is none)."""
    uri = str(Path(lake) / "checkpoints")
    try:
        rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
    except TableNotFoundError:
        return {}
    return {r["checkpoint_id"]: r for r in rows}


def lineage_chain(lake: str | Path, checkpoint_id: str) -> list[dict[str, Any]]:
    """The checkpoint and its ancestors, newest first.

    Raises:
        CheckpointNotFoundError: the checkpoint (or an ancestor) is not in the table.
    """
    rows = read_checkpoints(lake)
    chain = []
    current: str | None = checkpoint_id
    while current is not None:
        if current not in rows:
            known = ", ".join(sorted(rows)[-3:]) or "none"
            raise CheckpointNotFoundError(
                f"checkpoint {current!r} is not in the checkpoints table of {lake} (latest: {known}); "
                "`trajlake lineage latest` shows the newest"
            )
        chain.append(rows[current])
        current = rows[current]["parent_id"]
        if len(chain) > 10_000:
            raise CheckpointNotFoundError(f"the lineage of {checkpoint_id} loops")
    return chain


def emit_checkpoint_event(
    bootstrap: str, topic: str, info: CheckpointInfo, *, timeout_s: float = 30.0
) -> str:
    """Put the checkpoint and its lineage in the log as an ``annotation`` event; return its id.

    The event's ``episode_id`` is ``checkpoint:<id>`` (the learner's own
    stream, on its own topic, so episode tables never mistake it for an episode).

    Raises:
        InfraError: the broker did not acknowledge it.
    """
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    from schemas.codec import serialize_event
    from schemas.errors import InfraError
    from schemas.events import Annotation, AnnotationPayload, Producer
    from schemas.ids import new_id

    row = {k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in info.row().items()}
    event = Annotation(
        event_id=new_id(),
        episode_id=f"checkpoint:{info.checkpoint_id}",
        seq=0,
        ts=dt.datetime.now(dt.UTC),
        producer=Producer.here("learner"),
        payload=AnnotationPayload(key="checkpoint", value=row, author="learner"),
    )
    try:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", request_timeout_ms=int(timeout_s * 1000)
        )
        try:
            producer.send(topic, key=event.episode_id.encode(), value=serialize_event(event)).get(
                timeout=timeout_s
            )
        finally:
            producer.close(timeout=5)
    except KafkaError as exc:
        raise InfraError(f"checkpoint event not acknowledged by {bootstrap}: {exc}") from exc
    return event.event_id
