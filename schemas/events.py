"""Event envelope and event types: one frozen pydantic model per type.

Every event is an envelope (``event_id``, ``episode_id``, ``seq``, ``type``, ``ts``,
``schema_version``, ``producer``) around the type's own ``payload``. The types
are joined in a union discriminated by ``type``. On the wire (Kafka) an event
is the UTF-8 JSON of its envelope, so any Kafka client can produce one.

``schema_version`` is per type. Producers always write the current version; an
older version is upcast on read (see :mod:`schemas.upcasting`) and never
rewritten in the log.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    model_validator,
)

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        raise ValueError("timestamp must carry a timezone (UTC)")
    return value.astimezone(dt.UTC)


UtcDatetime = Annotated[dt.datetime, AfterValidator(_utc)]
"""A timezone-aware timestamp, normalised to UTC (microsecond precision)."""

EventId = Annotated[str, Field(pattern=UUID_RE.pattern, description="canonical lower-case UUID")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NonEmpty = Annotated[str, Field(min_length=1, max_length=512)]
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
"""A non-negative integer the tables store as int64 (a record outside it is quarantined, never written)."""
Int64 = Annotated[int, Field(ge=-INT64_MAX - 1, le=INT64_MAX)]
"""Any integer that fits int64."""
Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]
"""An integer the tables store as int32 (exit codes, attempts)."""
TokenId = Annotated[int, Field(ge=0, le=INT32_MAX)]
"""A token id (vocabularies are far below 2^31)."""


class Frozen(BaseModel):
    """Base of every schema model: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# ---------------------------------------------------------------- shared parts


SDK_VERSION = "0.1.0"
"""The trajlake SDK's version, as every producer records it (``trajlake.__version__`` too)."""


class Producer(Frozen):
    """Who wrote an event."""

    worker_id: NonEmpty
    """Stable id of the rollout worker (or job) that recorded the event."""
    host: str
    """Host name of the producing machine."""
    sdk_version: str
    """Version of the trajlake SDK that produced the event."""
    pid: Int64 | None = None
    """Process id of the producer, when known."""

    @classmethod
    def here(cls, worker_id: str) -> Producer:
        """This process as a producer: its host, pid and the SDK's version."""
        import os
        import socket

        return cls(worker_id=worker_id, host=socket.gethostname(), sdk_version=SDK_VERSION, pid=os.getpid())


class TaskRef(Frozen):
    """The task an episode attempts."""

    id: NonEmpty
    """Task id, unique within its family."""
    version: str = "1"
    """Task spec version."""
    family: str = "default"
    """Task family (e.g. ``pyfix``)."""


class PolicyRef(Frozen):
    """The policy that acted in an episode."""

    id: NonEmpty
    """Policy id (a model name, a learner run, a scripted policy)."""
    version: str = "0"
    """Policy version (e.g. the checkpoint id the worker ran)."""


class SamplingParams(Frozen):
    """Sampling parameters the policy used."""

    temperature: float | None = None
    """Softmax temperature."""
    top_p: float | None = None
    """Nucleus sampling mass."""
    max_tokens: Count | None = None
    """Completion token limit per model call."""
    seed: Int64 | None = None
    """Sampling seed, when fixed."""
    extra: dict[str, JsonValue] = Field(default_factory=dict)
    """Any further provider-specific parameters."""


class BlobRef(Frozen):
    """A content-addressed reference into the blob store."""

    sha256: Sha256
    """Hex sha256 of the content; the blob's address."""
    size: Count
    """Size of the content in bytes."""


class TextOutput(Frozen):
    """A text kept inline up to a limit, in full in the blob store beyond it."""

    text: str = ""
    """The text, or a preview of it when ``blob`` is set."""
    size: Count = 0
    """Size of the full text in UTF-8 bytes."""
    blob: BlobRef | None = None
    """Where the full text lives when it was larger than the inline limit."""

    @property
    def is_preview(self) -> bool:
        """True when ``text`` is only a preview of a larger blob."""
        return self.blob is not None


class ChatMessage(Frozen):
    """One message of a chat conversation (OpenAI chat-completions shape)."""

    role: Literal["system", "user", "assistant", "tool"]
    """Who speaks."""
    content: str
    """The message text."""
    name: str | None = None
    """Optional speaker name."""
    tool_call_id: str | None = None
    """For ``tool`` messages, the call they answer."""
    tool_calls: list[dict[str, JsonValue]] | None = None
    """For ``assistant`` messages, the native tool calls it made (OpenAI's shape; model_call v2)."""
    reasoning_content: str | None = None
    """For ``assistant`` messages, the reasoning the model gave before its answer (model_call v4)."""


class ResourceUsage(Frozen):
    """Resources a sandbox consumed."""

    cpu_s: float | None = None
    """CPU seconds (user + system)."""
    max_rss_bytes: Count | None = None
    """Peak resident memory."""
    wall_s: float | None = None
    """Wall-clock seconds the sandbox was held."""
    pids_peak: Count | None = None
    """Peak number of processes."""


class EpisodeLimits(Frozen):
    """Limits the worker enforces on an episode."""

    max_steps: Count | None = None
    """Maximum number of policy steps."""
    time_limit_s: float | None = None
    """Wall-clock limit of the whole episode."""


# ---------------------------------------------------------------- payloads


class EpisodeStartedPayload(Frozen):
    """Payload of ``episode_started``."""

    task: TaskRef
    """The task attempted."""
    policy: PolicyRef
    """The policy acting."""
    group_id: str | None = None
    """Group of attempts at the same task, for group-relative advantages."""
    attempt: Annotated[int, Field(ge=0, le=INT32_MAX)] = 0
    """Index of this attempt within its group."""
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    """Sampling parameters of the policy."""
    sandbox_image: str | None = None
    """Digest of the sandbox image the episode runs in."""
    limits: EpisodeLimits = Field(default_factory=EpisodeLimits)
    """Step and time limits."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Free-form metadata (e.g. the source format of an imported trajectory)."""


LogprobSemantics = Literal["processed", "scaled", "raw"]
"""What a sampler's log-probabilities are of: ``processed``, the distribution the token was drawn
from (after temperature, penalties, min-p, top-k and top-p: vLLM's ``processed_logprobs``);
``scaled``, the model's distribution at the temperature, before any truncation (SGLang's
default); ``raw``, the model's own distribution, before anything (vLLM's default)."""


class ServedBy(Frozen):
    """What sampled a model call: the server (or in-process model), and what its numbers mean."""

    kind: NonEmpty
    """``vllm``, ``sglang``, ``openai`` (any other OpenAI-compatible server), ``in_process``, ..."""
    version: str | None = None
    """The server's version, as it reported it."""
    logprob_semantics: LogprobSemantics | None = None
    """What the log-probabilities are of; ``None``: not established (not trained on unless the
    sampling transform is the identity, where all three agree)."""
    semantics_source: str | None = None
    """How the semantics were established (``configured``, ``probed``, ``sampler``)."""
    weights_version: str | None = None
    """The checkpoint the server had loaded (the policy version of the episode)."""


class ModelCallPayload(Frozen):
    """Payload of ``model_call``: one completion of the policy."""

    messages: list[ChatMessage] | None = None
    """The prompt messages, inline; or ``None`` when ``messages_ref`` is used."""
    messages_ref: BlobRef | None = None
    """The prompt messages (JSON) in the blob store, when too large to inline."""
    completion: str
    """The completion text."""
    prompt_token_ids: list[TokenId] | None = None
    """Token ids of the prompt, when the server returns them."""
    completion_token_ids: list[TokenId] | None = None
    """Token ids of the completion, when the server returns them."""
    completion_logprobs: list[float] | None = None
    """Behaviour log-probabilities of the completion tokens (same length as the ids)."""
    finish_reason: str | None = None
    """Why generation stopped (``stop``, ``length``, ``tool_calls``, ...)."""
    latency_s: float = Field(default=0.0, ge=0)
    """Wall-clock seconds the call took."""
    prompt_tokens: Count | None = None
    """Number of prompt tokens."""
    completion_tokens: Count | None = None
    """Number of completion tokens."""
    model: str | None = None
    """Served model name."""
    tool_calls: list[dict[str, JsonValue]] | None = None
    """The completion's native tool calls as the server sent them (``tool_calls``; new in v2)."""
    served_by: ServedBy | None = None
    """What sampled it and what its log-probabilities are of (new in v3)."""
    sampling: dict[str, JsonValue] | None = None
    """Every sampling parameter the request set, as sent (new in v3)."""
    history_break: bool = False
    """The client's token history did not continue into this call's prompt (token in/out; v3)."""
    reasoning: str | None = None
    """The completion's reasoning, apart from its answer (a server's reasoning parser, or the
    ``<think>`` block of the generated text; new in v4); ``completion`` is the answer alone."""

    @model_validator(mode="after")
    def _check(self) -> ModelCallPayload:
        if self.messages is not None and self.messages_ref is not None:
            raise ValueError("give either messages or messages_ref, not both")
        if (
            self.completion_token_ids is not None
            and self.completion_logprobs is not None
            and len(self.completion_token_ids) != len(self.completion_logprobs)
        ):
            raise ValueError("completion_logprobs must have one entry per completion token id")
        return self


class ToolCallPayload(Frozen):
    """Payload of ``tool_call``: the policy asks for a tool."""

    call_id: NonEmpty
    """Id that pairs the call with its ``tool_result``."""
    tool: NonEmpty
    """Tool name (``bash``, ``read_file``, ``write_file``, ``submit``, ...)."""
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    """Tool arguments."""


ToolErrorKind = Literal[
    "timeout", "nonzero_exit", "sandbox_error", "invalid_arguments", "unknown_tool", "output_limit"
]


class ToolResultPayloadV1(Frozen):
    """Payload of ``tool_result`` at schema version 1 (historical).

    Version 1 had one combined ``output`` text; version 2 split it into
    ``stdout`` and ``stderr`` with blob references. Kept to document and test
    the upcaster; never produced any more.
    """

    call_id: NonEmpty
    """Id of the call answered."""
    exit_code: Int32 | None = None
    """Exit code of the command."""
    output: str = ""
    """Combined stdout and stderr."""
    duration_s: float = Field(default=0.0, ge=0)
    """Wall-clock seconds."""
    timed_out: bool = False
    """Whether the command was killed at its timeout."""
    error: str | None = None
    """Free-text error, if any."""


class ToolResultPayload(Frozen):
    """Payload of ``tool_result`` (schema version 2): the outcome of a tool call."""

    call_id: NonEmpty
    """Id of the ``tool_call`` this answers."""
    exit_code: Int32 | None = None
    """Exit code; ``None`` when the command did not run to an exit."""
    stdout: TextOutput = Field(default_factory=TextOutput)
    """Standard output (preview + blob reference when large)."""
    stderr: TextOutput = Field(default_factory=TextOutput)
    """Standard error (preview + blob reference when large)."""
    duration_s: float = Field(default=0.0, ge=0)
    """Wall-clock seconds the tool ran."""
    timed_out: bool = False
    """Whether the command was killed at its timeout."""
    error_kind: ToolErrorKind | None = None
    """Classification of a failed call, ``None`` when it succeeded."""


SandboxAction = Literal[
    "created", "acquired", "reset", "snapshot", "restore", "crashed", "released", "destroyed"
]


class SandboxPayload(Frozen):
    """Payload of ``sandbox``: one lifecycle step of a sandbox."""

    action: SandboxAction
    """What happened."""
    backend: NonEmpty
    """Sandbox backend (``local``, ``docker``)."""
    sandbox_id: NonEmpty
    """Id of the sandbox."""
    image: str | None = None
    """Image digest the sandbox runs."""
    snapshot_ref: str | None = None
    """Reference of the snapshot taken or restored."""
    usage: ResourceUsage | None = None
    """Resources consumed, when measured."""
    detail: str | None = None
    """Human-readable detail (e.g. why it crashed)."""


class RewardPayload(Frozen):
    """Payload of ``reward``: a judge's verdict on an episode."""

    judge_name: NonEmpty
    """Registered judge name."""
    judge_version: NonEmpty
    """Content hash of the judge's code and configuration."""
    judge_spec: dict[str, JsonValue] = Field(default_factory=dict)
    """What is needed to rebuild exactly this judge (name + arguments)."""
    score: float
    """Scalar reward."""
    components: dict[str, float] = Field(default_factory=dict)
    """Named components of the score."""
    verdict: Literal["pass", "fail", "error"]
    """``error`` means the judge itself could not run: not a policy failure."""
    evidence: JsonValue = Field(default_factory=dict)
    """Supporting evidence (e.g. per-test results)."""
    flags: list[str] = Field(default_factory=list)
    """Flags such as ``reward_hack_suspected``."""
    source: Literal["online", "rejudge"] = "online"
    """Judged while the episode ran, or later by a re-judge job."""
    rejudge_run_id: str | None = None
    """The re-judge run, when ``source`` is ``rejudge``."""

    @model_validator(mode="after")
    def _check(self) -> RewardPayload:
        if self.source == "rejudge" and not self.rejudge_run_id:
            raise ValueError("a rejudge reward needs rejudge_run_id")
        return self


EpisodeStatus = Literal["success", "failure", "truncated", "infra_error", "aborted"]


class EpisodeEndedPayload(Frozen):
    """Payload of ``episode_ended``: always the last event of an episode."""

    status: EpisodeStatus
    """How the episode ended; ``infra_error`` is never a policy failure."""
    num_events: Count = 0
    """Events recorded before this one (equals this event's ``seq``)."""
    num_model_calls: Count = 0
    """Model calls in the episode."""
    num_tool_calls: Count = 0
    """Tool calls in the episode."""
    final_state_ref: str | None = None
    """Reference to the final sandbox state (snapshot or archive)."""
    reason: str | None = None
    """Why it ended this way (e.g. the exception that aborted it)."""


class AnnotationPayload(Frozen):
    """Payload of ``annotation``: a note attached to an episode."""

    key: NonEmpty
    """What the note is about."""
    value: JsonValue = None
    """The note."""
    author: str | None = None
    """Who wrote it."""


# ---------------------------------------------------------------- envelopes


class EventBase(Frozen):
    """The envelope fields every event carries."""

    event_id: EventId
    """UUIDv7 string; globally unique; the dedup key."""
    episode_id: NonEmpty
    """The trajectory this event belongs to; the Kafka key."""
    seq: Count
    """0, 1, 2, ... contiguous within an episode, assigned by the recorder."""
    ts: UtcDatetime
    """Event time, UTC, microseconds."""
    producer: Producer
    """Who produced the event."""


class EpisodeStarted(EventBase):
    """The first event of an episode."""

    type: Literal["episode_started"] = "episode_started"
    """Event type tag."""
    schema_version: Literal[1] = 1
    """Version of this type's schema."""
    payload: EpisodeStartedPayload
    """The type's own fields."""


class ModelCall(EventBase):
    """One completion of the policy."""

    type: Literal["model_call"] = "model_call"
    """Event type tag."""
    schema_version: Literal[4] = 4
    """Version of this type's schema (4: the completion's reasoning)."""
    payload: ModelCallPayload
    """The type's own fields."""


class ToolCall(EventBase):
    """A tool invocation requested by the policy."""

    type: Literal["tool_call"] = "tool_call"
    """Event type tag."""
    schema_version: Literal[1] = 1
    """Version of this type's schema."""
    payload: ToolCallPayload
    """The type's own fields."""


class ToolResult(EventBase):
    """The outcome of a tool invocation."""

    type: Literal["tool_result"] = "tool_result"
    """Event type tag."""
    schema_version: Literal[2] = 2
    """Version of this type's schema (2: stdout/stderr split, blob references)."""
    payload: ToolResultPayload
    """The type's own fields."""


class SandboxEvent(EventBase):
    """A sandbox lifecycle step."""

    type: Literal["sandbox"] = "sandbox"
    """Event type tag."""
    schema_version: Literal[1] = 1
    """Version of this type's schema."""
    payload: SandboxPayload
    """The type's own fields."""


class Reward(EventBase):
    """A judge's verdict on an episode."""

    type: Literal["reward"] = "reward"
    """Event type tag."""
    schema_version: Literal[1] = 1
    """Version of this type's schema."""
    payload: RewardPayload
    """The type's own fields."""


class EpisodeEnded(EventBase):
    """The last event of an episode."""

    type: Literal["episode_ended"] = "episode_ended"
    """Event type tag."""
    schema_version: Literal[1] = 1
    """Version of this type's schema."""
    payload: EpisodeEndedPayload
    """The type's own fields."""


class Annotation(EventBase):
    """A note attached to an episode."""

    type: Literal["annotation"] = "annotation"
    """Event type tag."""
    schema_version: Literal[1] = 1
    """Version of this type's schema."""
    payload: AnnotationPayload
    """The type's own fields."""


Event = Annotated[
    EpisodeStarted | ModelCall | ToolCall | ToolResult | SandboxEvent | Reward | EpisodeEnded | Annotation,
    Field(discriminator="type"),
]
"""Any event, discriminated by ``type``."""

EVENT_TYPES: dict[str, type[EventBase]] = {
    "episode_started": EpisodeStarted,
    "model_call": ModelCall,
    "tool_call": ToolCall,
    "tool_result": ToolResult,
    "sandbox": SandboxEvent,
    "reward": Reward,
    "episode_ended": EpisodeEnded,
    "annotation": Annotation,
}
"""Event class by type tag."""

PAYLOAD_TYPES: dict[str, type[Frozen]] = {
    "episode_started": EpisodeStartedPayload,
    "model_call": ModelCallPayload,
    "tool_call": ToolCallPayload,
    "tool_result": ToolResultPayload,
    "sandbox": SandboxPayload,
    "reward": RewardPayload,
    "episode_ended": EpisodeEndedPayload,
    "annotation": AnnotationPayload,
}
"""Current payload class by type tag."""


def current_version(event_type: str) -> int:
    """The schema version producers write for ``event_type``."""
    default: Any = EVENT_TYPES[event_type].model_fields["schema_version"].default
    return int(default)


EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
"""Validates and serialises any event."""
