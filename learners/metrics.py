"""Prometheus metrics of the learner (the process's default registry; served by ``--metrics-port``).

- ``trajlake_learner_step_seconds``: one optimiser step, from having its minibatch to asking for
  the next (forward, backward, clipping, the update and its metrics row);
- ``trajlake_learner_data_wait_seconds``: the time the learner waited for that minibatch;
- ``trajlake_learner_excluded_samples_total{reason}``: what a dataset left out, by the reasons of
  :attr:`learners.dataset.SampleSet.skipped` (episodes for the episode-level reasons, sample rows
  for the row-level ones, as there); the reasons are the dataset's own words, a bounded set;
- ``trajlake_learner_logprob_mismatch``: the mean absolute difference, over the latest step's
  minibatch, between the behaviour policy's recorded log-probs and the learner's (the parameters
  the learner step started from): ``logp_mismatch_mean`` of the step's metrics row;
- ``trajlake_learner_policy_lag``: how many policy versions behind the parent checkpoint the samples
  the latest learner step read were, on average (samples of a policy outside the parent's lineage
  have no known lag and are left out of the mean; unset until a step knew one).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from prometheus_client import Counter, Gauge, Histogram

STEP_SECONDS = Histogram(
    "trajlake_learner_step_seconds",
    "Seconds of one optimiser step, from having its minibatch to asking for the next.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
DATA_WAIT_SECONDS = Histogram(
    "trajlake_learner_data_wait_seconds",
    "Seconds the learner waited for its next minibatch.",
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
EXCLUDED = Counter("trajlake_learner_excluded_samples", "What datasets left out, by reason.", ["reason"])
LOGPROB_MISMATCH = Gauge(
    "trajlake_learner_logprob_mismatch",
    "Latest step's mean absolute difference between the behaviour log-probs and the learner's.",
)
POLICY_LAG = Gauge(
    "trajlake_learner_policy_lag", "Mean policy versions the latest learner step's samples were behind."
)

T = TypeVar("T")


def timed_steps(batches: Iterable[T]) -> Iterator[T]:
    """``batches``, timing the wait for each one and the step the caller takes with it.

    A step ends when the caller asks for the next minibatch (or the last step, at the end of the
    iteration); a step left by an exception is not observed.
    """
    it = iter(batches)
    while True:
        asked = time.monotonic()
        try:
            batch = next(it)
        except StopIteration:
            return
        got = time.monotonic()
        DATA_WAIT_SECONDS.observe(got - asked)
        yield batch
        STEP_SECONDS.observe(time.monotonic() - got)


def record_step(row: Mapping[str, float]) -> None:
    """Set the step gauges from one step's metrics row."""
    if "logp_mismatch_mean" in row:
        LOGPROB_MISMATCH.set(row["logp_mismatch_mean"])


def record_excluded(counts: Mapping[str, int]) -> None:
    """Count what a dataset left out, by reason."""
    for reason, n in counts.items():
        if n > 0:
            EXCLUDED.labels(reason).inc(n)


def record_policy_lag(lags: Sequence[int | None]) -> None:
    """Set the policy lag from the lags of a step's samples (``None``: unknown, left out)."""
    known = [lag for lag in lags if lag is not None]
    if known:
        POLICY_LAG.set(sum(known) / len(known))
