"""Prometheus metrics of judging (the process's default registry; served by ``--metrics-port``).

- ``trajlake_judge_seconds{judge}``: wall time of one judgement;
- ``trajlake_judge_verdicts_total{judge, verdict}``: judgements by verdict (``pass``, ``fail``,
  ``error``: the judge could not run);
- ``trajlake_judge_hack_flags_total{judge, flag}``: judgements that carry a flag of that kind (a
  kind counts once per judgement however many flags of it there are); a kind outside
  :data:`KNOWN_FLAGS` counts as ``other``, so the label's values stay bounded.

Judgements are counted where a caller gets one (:func:`judge_measured`), not inside
``Judge.__call__``: the source of :mod:`judges.registry` is part of every judge's version (its
content hash), so instrumenting it would make every judge a new version. A composite's
sub-judges are therefore not counted on their own; the composite's judgement carries their flags.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram

if TYPE_CHECKING:
    from judges.context import JudgeContext
    from judges.judgement import Judgement
    from judges.registry import Judge

KNOWN_FLAGS = frozenset({
    # the process judge's checks (judges.builtin.process.CHECKS)
    "tests_deleted", "tests_modified", "skip_markers_added", "assertions_weakened", "test_config_tampered",
    "exit_code_tricks", "test_runner_killed", "hidden_tests_accessed", "network_attempt",
    "write_outside_workspace", "special_cased_inputs", "test_detection", "code_meaning", "package_install",
    "inputs_modified", "startup_hook_planted",
    # what judges.code_facts finds beside them
    "test_framework_tampering", "magic_comparison",
    # the tests judge's own
    "judge_run_ended_by_agent", "report_disagrees",
    # a workspace that cannot be judged (judges.errors.WorkspaceUnjudgeable)
    "workspace_unjudgeable", "links_out_of_workspace",
})  # fmt: skip
"""Flag kinds the built-in judges raise (a test keeps this in step with their source)."""

JUDGE_SECONDS = Histogram(
    "trajlake_judge_seconds",
    "Wall time of one judgement.",
    ["judge"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
VERDICTS = Counter("trajlake_judge_verdicts", "Judgements by verdict.", ["judge", "verdict"])
HACK_FLAGS = Counter(
    "trajlake_judge_hack_flags", "Judgements carrying a flag of this kind.", ["judge", "flag"]
)


def record_judgement(judgement: Judgement, seconds: float) -> None:
    """Count one judgement that took ``seconds``."""
    name = judgement.judge_name
    JUDGE_SECONDS.labels(name).observe(seconds)
    VERDICTS.labels(name, judgement.verdict).inc()
    for kind in judgement.flag_kinds:
        HACK_FLAGS.labels(name, kind if kind in KNOWN_FLAGS else "other").inc()


def judge_measured(judge: Judge, ctx: JudgeContext) -> Judgement:
    """``judge(ctx)``, timed and counted in the judge metrics."""
    start = time.monotonic()
    judgement = judge(ctx)
    record_judgement(judgement, time.monotonic() - start)
    return judgement
