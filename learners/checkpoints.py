"""Checkpoints with lineage: weights, and exactly which data and judge produced them.

A checkpoint is a directory ``<root>/<checkpoint_id>/`` holding ``weights.npz``
(the model's parameters by their torch ``state_dict`` names, so either
framework loads them) and ``meta.json``; a Hugging Face model's checkpoint
holds ``hf/`` instead (what ``save_pretrained`` writes: any Hugging Face
loader or server, e.g. vLLM, opens it); its lineage (lake location, the Delta
version of every table read, judge name and version, offsets, number of
samples, parent checkpoint, training metrics) is published to the log as the
control stream ``checkpoint:<id>`` (:func:`publish_checkpoint`), which the
pipeline folds into the ``checkpoints`` table like every other table: a replay
rebuilds it. The weights stay in the checkpoint store, addressed by ``path``.
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

from lake import Lake
from learners.config import ModelConfig
from learners.errors import CheckpointNotFoundError
from schemas import fixes


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
class OptimizerState:
    """Adam's first and second moments by parameter name, and its step count.

    Saved beside the weights (``optimizer.npz``) so the next learner step continues the same
    optimiser instead of restarting its moments every iteration; both backends read it.
    """

    step: int
    m: dict[str, np.ndarray]
    v: dict[str, np.ndarray]


OPTIMIZER_FILE = "optimizer.npz"
HF_DIR = "hf"


def load_optimizer_state(path: str | Path) -> OptimizerState | None:
    """The optimiser state a checkpoint saved (``None`` when it saved none, e.g. a warm start)."""
    f = Path(path) / OPTIMIZER_FILE
    if not f.is_file():
        return None
    with np.load(f) as npz:
        m = {k[2:]: npz[k] for k in npz.files if k.startswith("m/")}
        v = {k[2:]: npz[k] for k in npz.files if k.startswith("v/")}
        return OptimizerState(int(npz["step"]), m, v)


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
    model_format: str = "tinylm"
    """``tinylm`` (``weights.npz`` of :class:`learners.torch_model.TinyLM`) or ``hf`` (``hf/``)."""

    @property
    def hf_dir(self) -> Path | None:
        """The Hugging Face model directory of an ``hf`` checkpoint."""
        return Path(self.path) / HF_DIR if self.model_format == "hf" else None

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
    optimizer: OptimizerState | None = None,
    hf_source: str | Path | None = None,
) -> CheckpointInfo:
    """Write weights, metadata and the optimiser's state under a new checkpoint id.

    Atomically: the files go to a temporary directory, renamed at the end. With
    ``hf_source`` (the Hugging Face model directory training started from), ``weights``
    are that model's (``state_dict`` names, as :class:`learners.hf_model.HFPolicyModel`
    has them) and the checkpoint is a Hugging Face directory again (``hf/``).
    """
    stamp = dt.datetime.now(dt.UTC)
    checkpoint_id = f"{policy_id}-{stamp:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    final = Path(root) / checkpoint_id
    tmp = Path(root) / f".{checkpoint_id}.tmp"
    tmp.mkdir(parents=True)
    if hf_source is not None:
        from learners.hf_model import save_hf

        if save_hf(hf_source, weights, tmp / HF_DIR) != "float32":
            # the served copy is in the checkpoint's own dtype (bf16, fp16); the fp32 master weights
            # the next step continues from are kept beside it
            master = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()}
            np.savez(str(tmp / MASTER_FILE), **master)  # type: ignore[arg-type]
    else:
        arrays = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()}
        np.savez(str(tmp / "weights.npz"), **arrays)  # type: ignore[arg-type]
    if optimizer is not None:
        moments = {f"m/{k}": np.asarray(a, np.float32) for k, a in optimizer.m.items()}
        moments |= {f"v/{k}": np.asarray(a, np.float32) for k, a in optimizer.v.items()}
        np.savez(str(tmp / OPTIMIZER_FILE), step=np.int64(optimizer.step), **moments)  # type: ignore[arg-type]
    info = CheckpointInfo(
        checkpoint_id=checkpoint_id,
        policy_id=policy_id,
        backend=backend,
        path=str(final.resolve()),
        created_at=stamp.isoformat(),
        config=config.to_dict(),
        lineage=lineage,
        model_format="hf" if hf_source is not None else "tinylm",
    )
    (tmp / "meta.json").write_text(json.dumps(asdict(info), indent=2, sort_keys=True))
    os.replace(tmp, final)
    return info


MASTER_FILE = "master.npz"
"""An ``hf`` checkpoint's fp32 master weights, when its ``hf/`` copy is in a narrower dtype."""


def load_checkpoint(path: str | Path) -> tuple[CheckpointInfo, ModelConfig, dict[str, np.ndarray]]:
    """Metadata, model configuration and weights of a checkpoint directory."""
    p = Path(path)
    meta = json.loads((p / "meta.json").read_text())
    meta["lineage"] = Lineage(**meta["lineage"])
    info = CheckpointInfo(**meta)
    if info.model_format == "hf":
        if (p / MASTER_FILE).is_file():  # fp32 master weights of a bf16/fp16 hf/ copy
            with np.load(p / MASTER_FILE) as npz:
                return info, ModelConfig.from_dict(info.config), {k: npz[k] for k in npz.files}
        return info, ModelConfig.from_dict(info.config), {}  # the weights are the hf/ directory's
    with np.load(p / "weights.npz") as npz:
        weights = {k: npz[k] for k in npz.files}
    return info, ModelConfig.from_dict(info.config), weights


def read_checkpoints(lake: str | Path) -> dict[str, dict[str, Any]]:
    """Every row of the ``checkpoints`` table, by checkpoint id (empty when there is none)."""
    lk = Lake(lake)
    if not lk.exists("checkpoints"):
        return {}
    return {r["checkpoint_id"]: r for r in lk.read("checkpoints").to_pylist()}


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
                f"checkpoint {current!r} is not in the checkpoints table of {lake} (latest: {known})",
                fix=fixes.NEWEST_CHECKPOINT,
            )
        chain.append(rows[current])
        current = rows[current]["parent_id"]
        if len(chain) > 10_000:
            raise CheckpointNotFoundError(f"the lineage of {checkpoint_id} loops")
    return chain


def publish_checkpoint(bootstrap: str, topic: str, info: CheckpointInfo, *, timeout_s: float = 30.0) -> str:
    """Put the checkpoint and its lineage in the log (the stream ``checkpoint:<id>``); return the event id.

    The ``checkpoints`` table gets the row when the pipeline folds the topic.

    Raises:
        SinkUnavailableError: the broker did not acknowledge it (the checkpoint's files are kept).
    """
    from ingest.publish import publish_events
    from schemas.control import CHECKPOINT, control_event

    event = control_event(CHECKPOINT, info.row(), "learner")
    publish_events(bootstrap, topic, [event], timeout_s=timeout_s)
    return event.event_id
