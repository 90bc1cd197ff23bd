"""Response models of the query API: one Base/Public family per resource.

``<X>Base`` holds a resource's own fields; ``<X>Public`` is what one item of
it looks like in a response (the Base plus its id); ``<X>sPublic`` is a page or
list of them with what it was computed from. Every answer computed from the
lake derives from :class:`LakeAnswer`, which says the Delta version of each
table it read.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PublicModel(BaseModel):
    """Base of every response model (immutable; unknown fields are an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class LakeAnswer(PublicModel):
    """An answer computed from tables of the lake."""

    versions: dict[str, int | None] = Field(
        description="Delta version of every table the answer was computed from (null: no such table yet)."
    )


class PagedAnswer(LakeAnswer):
    """A page of a list: ``next_cursor`` fetches the next one from the same table versions."""

    next_cursor: str | None = Field(
        default=None,
        description="Pass as `?cursor=` for the next page (same filters; read from the same table "
        "versions as this page); None on the last page.",
    )


class ErrorPublic(PublicModel):
    """The body of every error response."""

    error: str = Field(description="Machine-readable kind, e.g. `not_found`, `version_not_found`.")
    detail: str = Field(description="What was wrong, for a person.")


# ------------------------------------------------------------------ health, tables


class HealthPublic(PublicModel):
    """The service is up; ``damaged`` names the tables whose log or files are damaged (then 503)."""

    status: str = "ok"
    tables: int = Field(description="Tables the lake has now.")
    damaged: list[str] = Field(
        default_factory=list, description="Damaged tables (empty: the lake is intact)."
    )
    fix: str | None = Field(default=None, description="What to do about the damage.")


class TableBase(PublicModel):
    """A Delta table of the lake."""

    exists: bool
    version: int | None = Field(description="Current Delta version (null: the table does not exist yet).")
    rows: int | None = Field(description="Rows at that version (from the Delta log's file statistics).")
    problems: list[str] = Field(
        default_factory=list, description="Damage found in its log or files (then ``rows`` is null)."
    )


class TablePublic(TableBase):
    """A table, by name."""

    name: str


class TablesPublic(PublicModel):
    """Every table the lake can hold."""

    tables: list[TablePublic]


# ------------------------------------------------------------------ episodes


class EpisodeBase(PublicModel):
    """One episode (a row of the ``episodes`` table)."""

    task_id: str | None
    task_version: str | None
    task_family: str | None
    policy_id: str | None
    policy_version: str | None
    group_id: str | None
    attempt: int | None
    status: str | None = Field(
        description="success, failure, truncated, infra_error, aborted; null while open."
    )
    completeness: str = Field(description="complete, open or gap.")
    num_events: int
    max_seq: int
    missing_seqs: list[int] | None
    num_model_calls: int
    num_tool_calls: int
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    duration_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    sandbox_image: str | None
    group_size: int | None = None
    """Attempts in the episode's group, when the rollout recorded it."""
    source: str | None = Field(
        default=None, description="rollout | eval (an evaluation run's: never trained on) | import."
    )


class EpisodePublic(EpisodeBase):
    """An episode, by id."""

    episode_id: str


class EpisodesPublic(PagedAnswer):
    """A page of episodes, newest first."""

    total: int = Field(description="Episodes matching the filters (all pages).")
    limit: int
    offset: int
    judge: str | None = Field(default=None, description="Judge of the verdict filter, if one was applied.")
    judge_version: str | None = Field(default=None, description="Its version (default: the latest seen).")
    items: list[EpisodePublic]


class StepBase(PublicModel):
    """One event of an episode (a row of the ``steps`` table), its text possibly cut."""

    seq: int
    event_id: str
    type: str
    ts: dt.datetime
    call_id: str | None
    tool: str | None
    exit_code: int | None
    timed_out: bool | None
    error_kind: str | None
    duration_s: float | None
    text: str | None = Field(
        description="Completion, tool arguments or output, cut to `max_text` characters."
    )
    text_length: int | None = Field(description="Characters of the full text.")
    text_truncated: bool
    payload: Any = Field(
        default=None, description="The event's payload (with `include_payload`), long strings and lists cut."
    )
    payload_truncated: bool = False


class StepPublic(StepBase):
    """A step, by episode."""

    episode_id: str


class RewardBase(PublicModel):
    """One judgement of an episode (a row of the ``rewards`` table)."""

    judge_name: str
    judge_version: str
    event_id: str
    ts: dt.datetime
    score: float
    verdict: str
    components: dict[str, float] | None
    flags: list[str] | None
    evidence: Any = Field(description="The judge's evidence, long strings and lists cut.")
    evidence_truncated: bool = False
    source: str
    rejudge_run_id: str | None


class RewardPublic(RewardBase):
    """A reward, by episode."""

    episode_id: str


class FailureBase(PublicModel):
    """Why an episode failed under one judge version (a row of the ``failures`` table)."""

    judge_name: str
    judge_version: str
    category: str
    failing_seq: int | None
    signature: str
    message: str | None
    task_id: str | None
    policy_version: str | None


class FailurePublic(FailureBase):
    """A failure, by episode."""

    episode_id: str


class EpisodeDetailPublic(LakeAnswer):
    """An episode with its steps (in ``seq`` order), rewards (every judge version) and failures."""

    episode: EpisodePublic
    steps: list[StepPublic]
    steps_total: int = Field(description="Steps the episode has (`steps` holds at most `max_steps`).")
    rewards: list[RewardPublic]
    failures: list[FailurePublic]


# ------------------------------------------------------------------ failures


class BreakdownGroupPublic(PublicModel):
    """Failures of one group."""

    key: str | None = Field(description="The group (a category, task id, family or policy version).")
    count: int
    share: float = Field(description="count / total failures of the judge version.")


class BreakdownCellPublic(PublicModel):
    """Failures of one (``by``, ``then``) pair of groups."""

    key: str | None
    then: str | None
    count: int
    share: float


class BreakdownPublic(LakeAnswer):
    """Failures of one judge version per group (and per pair of groups with ``then``)."""

    judge: str | None
    judge_version: str | None
    by: str
    then: str | None = None
    filters: dict[str, str] = Field(default={}, description="The filters applied (breakdown key -> value).")
    total: int = Field(description="Failures left by the filters.")
    groups: list[BreakdownGroupPublic]
    cells: list[BreakdownCellPublic] = Field(default=[], description="Per (by, then) pair, most first.")


class TaskCountPublic(PublicModel):
    """A task and how many failures of a cluster it has."""

    task_id: str | None
    count: int


class ClusterBase(PublicModel):
    """Failures sharing one error signature."""

    category: str
    count: int
    share: float = Field(description="count / total failures of the judge version.")
    tasks: list[TaskCountPublic]
    example_episode_ids: list[str]
    example_message: str | None


class ClusterPublic(ClusterBase):
    """A cluster, by signature."""

    signature: str


class VersionCountPublic(PublicModel):
    """Failures of one policy version."""

    policy_version: str | None
    count: int


class FailureCasePublic(PublicModel):
    """Failures of one task family, category and signature: a candidate for the failure-case library."""

    cluster_id: str = Field(description="`fc-` and 12 hex digits of a hash of (family, category, signature).")
    family: str | None
    category: str
    signature: str
    count: int
    share: float = Field(description="count / total failures of the judge version.")
    tasks: list[TaskCountPublic]
    trend: list[VersionCountPublic] = Field(
        description="Failures per policy version, in the order they acted."
    )
    example_episode_ids: list[str] = Field(description="The newest episodes of the cluster.")
    example_message: str | None
    first_seen: dt.datetime | None
    last_seen: dt.datetime | None
    cases: list[str] = Field(description="Names of the curated cases saved from this cluster.")


class FailureCasesPublic(PagedAnswer):
    """Failure clusters by (task family, category, signature) of one judge version, biggest first."""

    judge: str | None
    judge_version: str | None
    total_failures: int
    total_clusters: int = Field(description="Clusters of at least `min_size` failures (all pages).")
    clusters: list[FailureCasePublic]


class ClustersPublic(PagedAnswer):
    """Failure clusters of one judge version, biggest first."""

    judge: str | None
    judge_version: str | None
    total_failures: int
    total_clusters: int = Field(description="Clusters of at least `min_size` failures (all pages).")
    clusters: list[ClusterPublic]


# ------------------------------------------------------------------ judges


class JudgeVersionPublic(PublicModel):
    """One version of a judge."""

    version: str
    episodes: int
    first_seen: dt.datetime
    last_seen: dt.datetime
    verdicts: dict[str, int]


class JudgePublic(PublicModel):
    """A judge and its versions, oldest first."""

    name: str
    versions: list[JudgeVersionPublic]


class JudgesPublic(LakeAnswer):
    """Every judge that scored episodes."""

    judges: list[JudgePublic]


class VerdictFlipPublic(PublicModel):
    """An episode whose verdict changed between two judge versions."""

    episode_id: str
    from_verdict: str
    to_verdict: str
    from_score: float
    to_score: float


class JudgeDiffPublic(PagedAnswer):
    """Two versions of a judge compared on the episodes both scored."""

    judge: str
    from_version: str
    to_version: str
    both: int = Field(description="Episodes scored by both versions.")
    only_from: int
    only_to: int
    flipped: int = Field(description="Episodes of `both` whose verdict changed.")
    matrix: dict[str, dict[str, int]] = Field(description="matrix[from verdict][to verdict] = episodes.")
    mean_score_from: float | None
    mean_score_to: float | None
    flips: list[VerdictFlipPublic] = Field(description="The flipped episodes, by id (at most `limit`).")


# ------------------------------------------------------------------ checkpoints


class CheckpointBase(PublicModel):
    """A learner checkpoint and what produced it (a row of the ``checkpoints`` table)."""

    parent_id: str | None
    policy_id: str
    policy_version: str
    backend: str
    path: str
    created_at: dt.datetime
    lake_uri: str
    table_versions: Any = Field(description="Delta version of every table the learner read.")
    judge_name: str | None
    judge_version: str | None
    offsets: Any
    num_samples: int
    metrics: Any


class CheckpointPublic(CheckpointBase):
    """A checkpoint, by id."""

    checkpoint_id: str


class CheckpointsPublic(PagedAnswer):
    """Checkpoints, newest first."""

    total: int
    items: list[CheckpointPublic]


class LineagePublic(LakeAnswer):
    """A checkpoint and its ancestors, newest first."""

    checkpoint_id: str
    chain: list[CheckpointPublic]
    broken_at: str | None = Field(
        description="A parent id that could not be followed (missing from the table, or a loop); "
        "null when the chain ends at a checkpoint without a parent."
    )


class ReviewPublic(PublicModel):
    """A reviewer's verdict on an episode (a row of ``reviews``)."""

    episode_id: str
    reviewer: str
    verdict: str = Field(description="ok | hack | judge_wrong | task_broken.")
    note: str | None
    item_id: str | None = Field(description="The queue item it answers, if any.")
    judge_name: str | None = Field(description="The judgement reviewed.")
    judge_version: str | None
    judge_verdict: str | None
    reviewed_at: dt.datetime


class ReviewItemPublic(PublicModel):
    """An episode in the review queue, why it is there, and its verdicts so far."""

    item_id: str
    episode_id: str
    rule: str = Field(description="The rule that queued it (rules are data: api/review_rules.yaml).")
    kind: str
    reason: str = Field(description="Why it is in the queue, in a sentence.")
    task_id: str | None
    task_family: str | None
    judge_name: str | None
    judge_version: str | None
    judge_verdict: str | None
    queued_at: dt.datetime
    fill_id: str
    reviews: list[ReviewPublic]


class ReviewQueuePublic(PagedAnswer):
    """A page of the review queue, newest first."""

    status: str
    total: int
    limit: int
    offset: int
    items: list[ReviewItemPublic]


class ReviewIn(PublicModel):
    """A verdict, as a reviewer posts it (the reviewer is the token's)."""

    verdict: str = Field(
        pattern="^(ok|hack|judge_wrong|task_broken)$", description="ok | hack | judge_wrong | task_broken."
    )
    note: str | None = Field(default=None, max_length=8000)


class ReviewAcceptedPublic(PublicModel):
    """A verdict in the log: the pipeline folds it into ``reviews`` on its next batch."""

    event_id: str
    review: ReviewPublic
    topic: str


# ------------------------------------------------------------------ quarantine


class QuarantineBase(PublicModel):
    """A record of the log that failed to parse or validate (a row of the ``quarantine`` table)."""

    key: str | None = Field(description="The Kafka key (the episode id, for a well-keyed record), as text.")
    raw: str | None = Field(
        description="The record's bytes as text (invalid UTF-8 replaced), cut to `max_text`."
    )
    raw_bytes: int | None = Field(description="Bytes of the whole record.")
    raw_truncated: bool
    error: str = Field(description="Why it was quarantined, for a person.")
    error_fields: list[str] | None = Field(
        description="The fields that failed validation (`<root>`: the whole)."
    )
    kafka_ts: dt.datetime | None = Field(description="When Kafka received it.")


class QuarantinePublic(QuarantineBase):
    """A quarantined record, by its place in the log."""

    topic: str
    partition: int
    offset: int


class QuarantinePagePublic(PagedAnswer):
    """A page of quarantined records, newest first."""

    total: int = Field(description="Quarantined records (all pages).")
    limit: int
    offset: int
    items: list[QuarantinePublic]


# ------------------------------------------------------------------ search


class SearchHitPublic(PublicModel):
    """One place of an episode where the text searched for occurs."""

    seq: int | None = Field(description="The step it is in (null: a field of the episode itself).")
    field: str = Field(
        description="What matched: episode_id, task_id, task_family, instruction, completion, "
        "tool_call, tool_output or annotation."
    )
    snippet: str = Field(description="The text around the match.")
    match_start: int = Field(description="Where the match starts in `snippet` (characters).")
    match_end: int = Field(description="Where it ends (exclusive).")


class SearchResultPublic(PublicModel):
    """An episode that matches, with its hits."""

    episode: EpisodePublic
    hit_count: int = Field(description="Places in the episode that match (all of them).")
    hits: list[SearchHitPublic] = Field(
        description="One snippet per hit, in step order (at most `max_hits`)."
    )


class SearchPublic(PagedAnswer):
    """Episodes whose ids, tasks, instruction, completions or tool outputs contain the text, newest first."""

    q: str
    total: int = Field(description="Matching episodes (all pages).")
    hits: int = Field(description="Matching places in all matching episodes.")
    limit: int
    offset: int
    items: list[SearchResultPublic]


# ------------------------------------------------------------------ what the learner made of an episode


class TrainingSamplePublic(PublicModel):
    """A training sequence of the episode (a row of ``samples``), its tokens counted, not listed."""

    sequence: int = Field(description="0, 1, ... within the episode (a broken token history starts one).")
    start: str = Field(description="episode | history_mismatch | after_untrainable.")
    first_seq: int = Field(description="The step of its first model call.")
    last_seq: int = Field(description="The step of its last model call.")
    num_calls: int
    problem: str | None = Field(description="Why a learner cannot train on it (null: trainable).")
    group_id: str | None
    policy_version: str | None
    temperature: float = Field(description="The temperature it was sampled (and is scored) at.")
    top_p: float | None
    top_k: int | None
    prompt_tokens: int
    response_tokens: int = Field(description="Tokens after the prompt (the policy's and the environment's).")
    loss_tokens: int = Field(description="Tokens the policy generated (in the loss).")
    mean_logprob: float | None = Field(description="Mean behaviour log-probability over the loss tokens.")


class TrainingVerdictPublic(PublicModel):
    """A checkpoint whose pinned snapshot held the episode, and whether it trained on it."""

    checkpoint_id: str
    parent_id: str | None
    created_at: dt.datetime
    judge_name: str | None
    judge_version: str | None
    table_versions: dict[str, int] = Field(description="The Delta versions its dataset read.")
    trained: bool | None = Field(description="null: the lake cannot say (see `reason` and `detail`).")
    reason: str | None = Field(
        description="Why not, in the learner's words (`reward_error`, `partial_group`, `group_waiting`, "
        "`read_by_parent`, a sample's `problem`, `zero_advantage_group`, ...), or why it cannot be told "
        "(`lineage_incomplete`, `snapshot_unreadable`, `token_out_of_vocab_unknown`); null when trained."
    )
    detail: str = Field(description="The same, for a person.")
    reward: float | None = Field(
        default=None, description="The reward its judge version gave (when trained)."
    )
    advantage: float | None = Field(
        default=None, description="The group-relative advantage each of its samples got (when trained)."
    )
    sequences: int = Field(default=0, description="Its sequences trained on.")
    group_rewards: dict[str, float] = Field(
        default_factory=dict, description="Episode -> reward of the group it was trained in (when trained)."
    )


class RetractionHitPublic(PublicModel):
    """A retraction that takes the episode out of training from now on (a row of ``retractions``)."""

    retraction_id: str
    scope: str = Field(description="episode | group | task_version | judge_version.")
    target: str
    reason: str
    retracted_by: str
    retracted_at: dt.datetime


class EpisodeTrainingPublic(LakeAnswer):
    """What the learner made of an episode: its sample rows, and each checkpoint that read it."""

    episode_id: str
    samples: list[TrainingSamplePublic]
    trained_by: list[str] = Field(description="The checkpoints that trained on it, newest first.")
    reason: str | None = Field(
        description="When none did: why, as the newest checkpoint that decided said it (`not_read_yet`: "
        "no checkpoint's snapshot holds it yet); null when trained, or when it cannot be told."
    )
    detail: str
    checkpoints: list[TrainingVerdictPublic] = Field(
        description="Every checkpoint whose pinned snapshot held the episode, newest first."
    )
    checkpoints_not_holding: int = Field(
        description="Checkpoints whose snapshot did not hold it (read before it arrived, or no lake data)."
    )
    retractions: list[RetractionHitPublic] = Field(description="Retractions naming it now, oldest first.")


class BlobPublic(PublicModel):
    """A blob's text, opened on demand."""

    sha256: str
    size: int = Field(description="The blob's size in bytes.")
    text: str = Field(description="Its text (UTF-8, bytes that are not replaced), cut to `max_bytes`.")
    truncated: bool
