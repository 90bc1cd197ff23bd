"""Arrow schemas of every Delta table of the lake.

The tables are projections of the log; these schemas are their contract with
the pipelines that write them and the learners, API and Spark jobs that read
them. Columns holding nested, open-ended data (payloads, evidence) are JSON text
so that every Delta engine reads them alike.
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

EVENTS = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("event_date", pa.date32(), nullable=False),  # partition column
        pa.field("schema_version", pa.int32(), nullable=False),  # as written in the log
        pa.field("producer", pa.string(), nullable=False),  # JSON
        pa.field("payload", pa.string(), nullable=False),  # JSON, upcast to the current version
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
    ]
)
"""Bronze: one row per valid event, deduplicated by ``event_id``; partitioned by ``event_date``."""

QUARANTINE = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("raw", pa.binary()),
        pa.field("error", pa.string(), nullable=False),
        pa.field("error_fields", pa.list_(pa.string())),
        pa.field("kafka_ts", TS),
    ]
)
"""One row per record that failed to parse or validate."""

EPISODES = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("task_id", pa.string()),
        pa.field("task_version", pa.string()),
        pa.field("task_family", pa.string()),
        pa.field("policy_id", pa.string()),
        pa.field("policy_version", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("status", pa.string()),  # None while open
        pa.field("completeness", pa.string(), nullable=False),  # complete | open | gap
        pa.field("num_events", pa.int64(), nullable=False),
        pa.field("max_seq", pa.int64(), nullable=False),
        pa.field("missing_seqs", pa.list_(pa.int64())),
        pa.field("num_model_calls", pa.int64(), nullable=False),
        pa.field("num_tool_calls", pa.int64(), nullable=False),
        pa.field("started_at", TS),
        pa.field("ended_at", TS),
        pa.field("duration_s", pa.float64()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
        pa.field("sandbox_image", pa.string()),
        # attempts in the episode's group, when the rollout recorded it (metadata.group_size)
        pa.field("group_size", pa.int32()),
        # rollout | eval | import (episode_started's metadata.source): eval episodes are never trained on
        pa.field("source", pa.string()),
    ]
)
"""Silver: one row per episode."""

STEPS = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("call_id", pa.string()),
        pa.field("tool", pa.string()),
        pa.field("exit_code", pa.int32()),
        pa.field("timed_out", pa.bool_()),
        pa.field("error_kind", pa.string()),
        pa.field("duration_s", pa.float64()),
        pa.field("text", pa.string()),  # completion, tool arguments or output preview
        pa.field("payload", pa.string(), nullable=False),  # JSON
    ]
)
"""Silver: one row per event of an episode, flattened and typed."""

REWARDS = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("judge_name", pa.string(), nullable=False),
        pa.field("judge_version", pa.string(), nullable=False),
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("score", pa.float64(), nullable=False),
        pa.field("verdict", pa.string(), nullable=False),
        pa.field("components", pa.string()),  # JSON object name -> float
        pa.field("flags", pa.list_(pa.string())),
        pa.field("evidence", pa.string()),  # JSON
        pa.field("source", pa.string(), nullable=False),
        pa.field("rejudge_run_id", pa.string()),
    ]
)
"""Gold: one row per (episode, judge name, judge version); the latest reward wins."""

FAILURES = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("judge_name", pa.string(), nullable=False),
        pa.field("judge_version", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("failing_seq", pa.int64()),
        pa.field("signature", pa.string(), nullable=False),
        pa.field("message", pa.string()),
        pa.field("task_id", pa.string()),
        pa.field("policy_version", pa.string()),
    ]
)
"""Gold: one row per failed episode and judge version."""

TASKS = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("version", pa.string(), nullable=False),
        pa.field("family", pa.string(), nullable=False),
        pa.field("tier", pa.string()),
        pa.field("spec", pa.string(), nullable=False),  # JSON of the validated spec
        pa.field("spec_digest", pa.string(), nullable=False),
        pa.field("state_digest", pa.string()),
        pa.field("admitted", pa.bool_(), nullable=False),
        pa.field("reasons", pa.list_(pa.string())),
        pa.field("admitted_at", TS, nullable=False),
        # the task's own judge on the untouched initial state: what doing nothing earns
        pa.field("do_nothing_score", pa.float64()),
        # the best its judge gave a null-effort state (an output emptied, echoed, padded; a package
        # of stubs): admission refuses the task when it is above do_nothing_score
        pa.field("null_effort_max", pa.float64()),
        # train | eval: assigned once, at the task's first admission (or declared by its spec), and kept
        # by every later version; training never samples an eval task
        pa.field("split", pa.string()),
    ]
)
"""Task specs with their admission results."""

CHECKPOINTS = pa.schema(
    [
        pa.field("checkpoint_id", pa.string(), nullable=False),
        pa.field("parent_id", pa.string()),
        pa.field("policy_id", pa.string(), nullable=False),
        pa.field("policy_version", pa.string(), nullable=False),
        pa.field("backend", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("created_at", TS, nullable=False),
        pa.field("lake_uri", pa.string(), nullable=False),
        pa.field("table_versions", pa.string(), nullable=False),  # JSON table -> Delta version
        pa.field("judge_name", pa.string()),
        pa.field("judge_version", pa.string()),
        pa.field("offsets", pa.string()),  # JSON topic/partition -> offset
        pa.field("num_samples", pa.int64(), nullable=False),
        pa.field("metrics", pa.string()),  # JSON
    ]
)
"""Learner checkpoints with the data and judge versions that produced them."""

SAMPLES = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("sequence", pa.int32(), nullable=False),  # 0, 1, ... within the episode
        pa.field("start", pa.string(), nullable=False),  # episode | history_mismatch | after_untrainable
        pa.field("first_seq", pa.int64(), nullable=False),  # seq of its first model call
        pa.field("last_seq", pa.int64(), nullable=False),  # seq of its last model call
        pa.field("num_calls", pa.int32(), nullable=False),
        pa.field("problem", pa.string()),  # why a learner cannot train on it; None: trainable
        pa.field("task_id", pa.string()),
        pa.field("task_family", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("policy_version", pa.string()),
        pa.field("temperature", pa.float64(), nullable=False),  # the sampling transform it was drawn with
        pa.field("top_p", pa.float64()),
        pa.field("top_k", pa.int32()),
        pa.field("prompt_ids", pa.list_(pa.int32()), nullable=False),
        pa.field("response_ids", pa.list_(pa.int32()), nullable=False),  # everything after the prompt
        pa.field("response_mask", pa.list_(pa.int8()), nullable=False),  # 1: the policy generated it
        pa.field("response_logprobs", pa.list_(pa.float32()), nullable=False),  # behaviour; 0 where masked
        pa.field("num_loss_tokens", pa.int32(), nullable=False),
        pa.field("prompt_messages", pa.string()),  # JSON chat messages of the first call, when inline
        pa.field("response_messages", pa.string(), nullable=False),  # JSON: what followed the prompt
    ]
)
"""Gold: one row per training sequence of an episode (typed tokens, loss mask, behaviour log-probs).

Folded from the episode's own events (``episode_started`` and ``model_call``), so a re-judge
never rewrites it; the learner joins it with ``episodes`` and ``rewards`` at one snapshot.
"""

FAILURE_CASES = pa.schema(
    [
        pa.field("case_id", pa.string(), nullable=False),  # the case's name, as given to `failures curate`
        pa.field("cluster_id", pa.string(), nullable=False),  # what `failures cases` named its cluster
        pa.field("family", pa.string()),
        pa.field("category", pa.string(), nullable=False),
        pa.field("signature", pa.string(), nullable=False),
        pa.field("judge_name", pa.string(), nullable=False),  # the judge version whose failures it groups
        pa.field("judge_version", pa.string(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),  # its failed episodes when curated
        pa.field("episode_ids", pa.list_(pa.string()), nullable=False),  # its episodes, newest first (capped)
        pa.field("task_ids", pa.list_(pa.string()), nullable=False),
        pa.field("policy_versions", pa.list_(pa.string()), nullable=False),
        pa.field("example_episode_id", pa.string(), nullable=False),  # the newest episode of the case
        pa.field("failing_seq", pa.int64()),  # its failing step
        pa.field("failing_observation", pa.string()),  # that step's observation (a tool's output), its head
        pa.field("message", pa.string()),  # the attribution's message for that episode
        pa.field("notes", pa.string()),
        pa.field("curated_by", pa.string(), nullable=False),
        pa.field("curated_at", TS, nullable=False),
    ]
)
"""The failure-case library: recurring failures a person saved (``trajlake failures curate``).

Folded from the ``case:<case_id>`` control stream (the latest curation of a name wins), so a
replay rebuilds it; tasks drafted from a case name it in their lineage.
"""

DRIFT = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),  # the `trajlake drift` run
        pa.field("checked_at", TS, nullable=False),
        pa.field("task_id", pa.string()),
        pa.field("task_version", pa.string()),  # the version the episode ran
        pa.field("task_family", pa.string()),
        pa.field("reproducible", pa.bool_()),  # null: it could not be checked (error says why)
        pa.field("first_diverging_seq", pa.int64()),
        pa.field("steps_checked", pa.int64(), nullable=False),  # tool calls executed again
        pa.field("recorded", pa.string()),  # JSON: the diverging call and its recorded outcome
        pa.field("replayed", pa.string()),  # JSON: its outcome now
        pa.field("likely_causes", pa.list_(pa.string()), nullable=False),  # what changed since it ran
        pa.field("image_recorded", pa.string()),  # the image digest the episode's sandbox ran
        pa.field("image_now", pa.string()),
        pa.field("error", pa.string()),
    ]
)
"""Whether recorded episodes still reproduce (``trajlake drift``): one row per episode and run.

Folded from the ``drift:<episode_id>@<run_id>`` control stream on the curation topic.
"""

REVIEW_QUEUE = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),  # rv- and 12 hex of (episode, rule)
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("rule", pa.string(), nullable=False),  # the rule's name (rules are data: a YAML file)
        pa.field("kind", pa.string(), nullable=False),  # what the rule looks for
        pa.field("reason", pa.string(), nullable=False),  # why this episode is here, in a sentence
        pa.field("task_id", pa.string()),
        pa.field("task_family", pa.string()),
        pa.field("judge_name", pa.string()),  # the judgement the reason is about
        pa.field("judge_version", pa.string()),
        pa.field("judge_verdict", pa.string()),
        pa.field("queued_at", TS, nullable=False),
        pa.field("fill_id", pa.string(), nullable=False),  # the `review fill` run that queued it
    ]
)
"""Episodes queued for a person to look at, each with the rule that put it there and why."""

REVIEWS = pa.schema(
    [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("reviewer", pa.string(), nullable=False),  # who (from their token, through the API)
        pa.field("verdict", pa.string(), nullable=False),  # ok | hack | judge_wrong | task_broken
        pa.field("note", pa.string()),
        pa.field("item_id", pa.string()),  # the queue item it answers, if any
        pa.field("judge_name", pa.string()),  # the judgement reviewed
        pa.field("judge_version", pa.string()),
        pa.field("judge_verdict", pa.string()),
        pa.field("reviewed_at", TS, nullable=False),
    ]
)
"""Reviewers' verdicts on episodes (the latest of one reviewer on one episode wins)."""

RETRACTIONS = pa.schema(
    [
        pa.field("retraction_id", pa.string(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),  # episode | group | task_version | judge_version
        pa.field(
            "target", pa.string(), nullable=False
        ),  # an episode or group id, TASK@VERSION, JUDGE@VERSION
        pa.field("reason", pa.string(), nullable=False),  # a confirmed hack, a broken task, a failed canary
        pa.field("retracted_by", pa.string(), nullable=False),
        pa.field("retracted_at", TS, nullable=False),
    ]
)
"""Data taken out of training: datasets read after a retraction exclude what it names (``retracted``)."""

TABLES: dict[str, pa.Schema] = {
    "events": EVENTS,
    "quarantine": QUARANTINE,
    "episodes": EPISODES,
    "steps": STEPS,
    "rewards": REWARDS,
    "failures": FAILURES,
    "tasks": TASKS,
    "checkpoints": CHECKPOINTS,
    "samples": SAMPLES,
    "failure_cases": FAILURE_CASES,
    "drift": DRIFT,
    "review_queue": REVIEW_QUEUE,
    "reviews": REVIEWS,
    "retractions": RETRACTIONS,
}
"""Arrow schema by table name."""

PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "events": ("event_id",),
    "quarantine": ("topic", "partition", "offset"),
    "episodes": ("episode_id",),
    "steps": ("episode_id", "seq"),
    "rewards": ("episode_id", "judge_name", "judge_version"),
    "failures": ("episode_id", "judge_name", "judge_version"),
    "tasks": ("task_id", "version"),
    "checkpoints": ("checkpoint_id",),
    "samples": ("episode_id", "sequence"),
    "failure_cases": ("case_id",),
    "drift": ("episode_id", "run_id"),
    "review_queue": ("item_id",),
    "reviews": ("episode_id", "reviewer"),
    "retractions": ("retraction_id",),
}
"""The key each table is merged by."""

PARTITION_COLUMNS: dict[str, tuple[str, ...]] = {"events": ("event_date",)}
"""Partition columns by table (tables not listed are unpartitioned)."""
