r"""``EpisodeRecorder``: the API a rollout worker uses to put its episodes in the log.

Usage::

    with EpisodeRecorder.open(bootstrap="127.0.0.1:9092", home=home, worker_id="w1") as rec:
        with rec.episode(task=TaskRef(id="t1"), policy=PolicyRef(id="p")) as ep:
            ep.model_call(messages=[...], completion="ls")
            call = ep.tool_call("bash", {"cmd": "ls"})
            ep.tool_result(call, exit_code=0, stdout="a.py\\n")
            ep.reward(judge_name="tests", judge_version="abc", score=1.0, verdict="pass")

The recorder assigns ``event_id`` (UUIDv7) and a contiguous ``seq``, stamps the
producer and the time, validates every event against its schema before anything
leaves, moves large texts to the blob store, and always ends an episode with
``episode_ended`` (``infra_error`` or ``aborted`` when the block raised).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from pydantic import ValidationError

from ingest.blobs import BlobStore
from ingest.delivery import Delivery, SpooledDelivery
from ingest.errors import EpisodeStateError
from ingest.kafka_sink import KafkaSinkConfig, make_sink
from ingest.shipper import ShippedDelivery
from ingest.sink import EventSink
from ingest.spool import FsyncPolicy, Spool
from schemas.codec import parse_event, translate_validation_error
from schemas.errors import InfraError, SchemaError
from schemas.events import (
    EVENT_TYPES,
    SDK_VERSION,
    Annotation,
    AnnotationPayload,
    BlobRef,
    ChatMessage,
    EpisodeEnded,
    EpisodeEndedPayload,
    EpisodeLimits,
    EpisodeStarted,
    EpisodeStartedPayload,
    EpisodeStatus,
    Event,
    EventBase,
    ModelCall,
    ModelCallPayload,
    PolicyRef,
    Producer,
    ResourceUsage,
    Reward,
    RewardPayload,
    SamplingParams,
    SandboxEvent,
    SandboxPayload,
    ServedBy,
    TaskRef,
    TextOutput,
    ToolCall,
    ToolCallPayload,
    ToolErrorKind,
    ToolResult,
    ToolResultPayload,
    current_version,
)
from schemas.ids import new_id

DEFAULT_TOPIC = "trajlake.episodes"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class EpisodeRecorder:
    """Records episodes as events through a spooled, acknowledged delivery.

    Args:
        delivery: where serialized events go (owned: closed with the recorder).
        worker_id: stable id of this worker; stamped on every event.
        topic: destination topic.
        blobs: blob store for texts over ``inline_limit``; without one, large
            texts are kept inline in full.
        inline_limit: UTF-8 bytes of a text (stdout, stderr, prompt messages)
            kept inline; larger ones go to the blob store with a preview inline.
        infra_errors: exception types that end an episode as ``infra_error``
            rather than ``aborted`` (every :class:`InfraError` always does).
    """

    def __init__(
        self,
        delivery: Delivery,
        *,
        worker_id: str,
        topic: str = DEFAULT_TOPIC,
        blobs: BlobStore | None = None,
        inline_limit: int = 8192,
        infra_errors: tuple[type[BaseException], ...] = (),
        producer: Producer | None = None,
    ) -> None:
        self.delivery = delivery
        self.topic = topic
        self.blobs = blobs
        self.inline_limit = inline_limit
        self.infra_errors: tuple[type[BaseException], ...] = (InfraError, *infra_errors)
        self.producer = producer or Producer(
            worker_id=worker_id, host=socket.gethostname(), sdk_version=SDK_VERSION, pid=os.getpid()
        )
        self._producer_json = self.producer.model_dump_json().encode("utf-8")
        self._closed = False

    @classmethod
    def open(
        cls,
        *,
        bootstrap: str,
        home: Path,
        worker_id: str,
        topic: str = DEFAULT_TOPIC,
        sink: EventSink | None = None,
        spool_max_bytes: int = 256 << 20,
        spool_full_timeout_s: float = 30.0,
        fsync: FsyncPolicy = "never",
        sink_config: KafkaSinkConfig | None = None,
        delivery: Literal["shipper", "inline"] = "shipper",
        **kwargs: Any,
    ) -> EpisodeRecorder:
        """Wire a recorder to Kafka, with a spool and a blob store under ``home``.

        The spool is ``home/spool/<worker_id>`` and the blobs ``home/blobs``.
        Records a previous process with the same ``worker_id`` left in its spool
        are re-sent first.

        Args:
            bootstrap: Kafka bootstrap servers.
            home: the trajlake home.
            worker_id: stable id of this worker (names its spool).
            topic: destination topic.
            sink: an explicit sink (e.g. :class:`MemorySink`); implies ``inline``.
            spool_max_bytes: the spool's size bound.
            spool_full_timeout_s: how long a full spool blocks before raising.
            fsync: the spool's fsync policy.
            sink_config: Kafka producer settings.
            delivery: ``shipper`` (default: a sidecar process tails the spool
                into Kafka, so the worker never pays for Kafka) or ``inline``
                (this process sends, with the spool as its safety net).
            **kwargs: passed to the constructor (``blobs``, ``inline_limit``, ...).
        """
        spool = Spool(
            Path(home) / "spool" / worker_id,
            max_bytes=spool_max_bytes,
            full_timeout_s=spool_full_timeout_s,
            fsync=fsync,
        )
        cfg = sink_config or KafkaSinkConfig(bootstrap_servers=bootstrap, client_id=f"trajlake-{worker_id}")
        chosen: Delivery
        try:
            if sink is not None or delivery == "inline":
                chosen = SpooledDelivery(spool, sink or make_sink(cfg))
            else:
                chosen = ShippedDelivery(spool, cfg)
        except BaseException:
            spool.close()  # a failed open must not keep the spool's lock (a retry would be refused)
            raise
        blobs = kwargs.pop("blobs", None) or BlobStore(str(Path(home) / "blobs"))
        return cls(chosen, worker_id=worker_id, topic=topic, blobs=blobs, **kwargs)

    # ------------------------------------------------------------- episodes

    def episode(
        self,
        *,
        task: TaskRef | Mapping[str, Any],
        policy: PolicyRef | Mapping[str, Any],
        episode_id: str | None = None,
        group_id: str | None = None,
        attempt: int = 0,
        sampling: SamplingParams | Mapping[str, Any] | None = None,
        sandbox_image: str | None = None,
        limits: EpisodeLimits | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        ts: dt.datetime | None = None,
        keep_events: bool = False,
        event_ids: Callable[[int], str] | None = None,
    ) -> Episode:
        """Start an episode: records ``episode_started`` and returns the episode.

        Use it as a context manager so that it always ends with ``episode_ended``.
        With ``keep_events`` the episode also keeps its events (parsed back from
        the bytes sent) in ``episode.events``, for a judge at the end.
        ``event_ids(seq)`` names each event (default: a fresh UUIDv7): an importer derives
        them from its source, so that importing the same source again sends the same ids
        and the pipeline keeps one copy.

        Raises:
            SchemaError: an argument violates the ``episode_started`` schema.
        """
        if self._closed:
            raise EpisodeStateError("recorder is closed")
        eid = episode_id or new_id()
        if not isinstance(eid, str) or not 1 <= len(eid) <= 512:
            raise SchemaError(
                "invalid episode_started event: episode_id: must be 1-512 characters",
                [("episode_id", "must be 1-512 characters")],
            )
        ep = Episode(self, eid)
        ep._event_ids = event_ids
        if keep_events:
            ep.events = []
        ep._emit(
            EpisodeStarted,
            lambda: EpisodeStartedPayload(
                task=task if isinstance(task, TaskRef) else TaskRef(**task),
                policy=policy if isinstance(policy, PolicyRef) else PolicyRef(**policy),
                group_id=group_id,
                attempt=attempt,
                sampling=_coerce(sampling, SamplingParams),
                sandbox_image=sandbox_image,
                limits=_coerce(limits, EpisodeLimits),
                metadata=dict(metadata or {}),
            ),
            ts=ts,
        )
        return ep

    # ------------------------------------------------------------- plumbing

    def text_output(self, text: str | bytes) -> TextOutput:
        """Inline ``text`` up to the limit; beyond it, store it as a blob and keep a preview.

        The preview keeps the head and the tail (where tracebacks end).
        """
        if isinstance(text, bytes):
            raw = text
            text = text.decode("utf-8", errors="replace")
        else:
            raw = text.encode("utf-8")
        if len(raw) <= self.inline_limit or self.blobs is None:
            return TextOutput(text=text, size=len(raw))
        ref = self.blobs.put(raw)
        half = max(1, self.inline_limit // 2)
        preview = (
            raw[:half].decode("utf-8", errors="ignore")
            + f"\n... [{len(raw) - 2 * half} bytes elided; full text in blob {ref.sha256}] ...\n"
            + raw[-half:].decode("utf-8", errors="ignore")
        )
        return TextOutput(text=preview, size=len(raw), blob=ref)

    def flush(self, timeout: float | None = 60.0) -> None:
        """Wait until every recorded event is acknowledged by Kafka.

        Raises:
            DeliveryTimeoutError: some are still unacknowledged (they stay spooled).
        """
        self.delivery.flush(timeout)

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush (best effort) and release the spool and connections.

        Unacknowledged events stay in the spool and are re-sent by the next
        recorder opened on it.
        """
        if not self._closed:
            self._closed = True
            self.delivery.close(timeout)

    def __enter__(self) -> EpisodeRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _coerce(value: Any, cls: type[Any]) -> Any:
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    return cls(**value)


class Episode:
    """One episode being recorded. Not thread-safe: drive it from one thread.

    Every method validates its event and raises :class:`SchemaError` (recording
    nothing, consuming no ``seq``) when it violates the schema.
    """

    def __init__(self, recorder: EpisodeRecorder, episode_id: str) -> None:
        self.recorder = recorder
        self.episode_id = episode_id
        self._key = episode_id.encode("utf-8")
        # Constant envelope bytes of this episode, from episode_id to seq.
        self._episode_head = b'","episode_id":%s,"producer":%s,"seq":' % (
            json.dumps(episode_id).encode("utf-8"),
            recorder._producer_json,
        )
        self.seq = 0
        self.ended: EpisodeStatus | None = None
        self.num_model_calls = 0
        self.num_tool_calls = 0
        self.last_verdict: str | None = None
        self.final_state_ref: str | None = None
        """Reference to the final state (a blob's sha256); ``episode_ended`` carries it."""
        self._partition: int | None = None
        self._partition_known = False
        self._call_counter = 0
        self._lock = threading.Lock()
        self._event_ids: Callable[[int], str] | None = None
        self.events: list[Event] | None = None
        """The episode's events as recorded, when the episode keeps them (``keep_events``)."""

    # ------------------------------------------------------------- events

    def model_call(
        self,
        *,
        completion: str,
        messages: Sequence[ChatMessage | Mapping[str, Any]] | None = None,
        prompt_token_ids: Sequence[int] | None = None,
        completion_token_ids: Sequence[int] | None = None,
        completion_logprobs: Sequence[float] | None = None,
        finish_reason: str | None = None,
        latency_s: float = 0.0,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        model: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        served_by: ServedBy | Mapping[str, Any] | None = None,
        sampling: Mapping[str, Any] | None = None,
        history_break: bool = False,
        reasoning: str | None = None,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record one completion of the policy (with its native ``tool_calls``, when it made any).

        ``served_by`` says what sampled it and what its log-probabilities are of,
        ``sampling`` every sampling parameter the request set, ``reasoning`` the
        completion's reasoning apart from its answer (``completion``).

        Prompt messages larger than the inline limit go to the blob store and
        the event carries their reference instead.
        """

        def build() -> ModelCallPayload:
            msgs = None
            ref: BlobRef | None = None
            if messages is not None:
                msgs = [m if isinstance(m, ChatMessage) else ChatMessage(**m) for m in messages]
                rec = self.recorder
                if rec.blobs is not None:
                    size = sum(len(m.content) + len(m.reasoning_content or "") for m in msgs)
                    if size > rec.inline_limit:
                        blob = json.dumps([m.model_dump(mode="json") for m in msgs]).encode()
                        ref, msgs = rec.blobs.put(blob), None
            return ModelCallPayload(
                messages=msgs,
                messages_ref=ref,
                completion=completion,
                prompt_token_ids=list(prompt_token_ids) if prompt_token_ids is not None else None,
                completion_token_ids=(
                    list(completion_token_ids) if completion_token_ids is not None else None
                ),
                completion_logprobs=(list(completion_logprobs) if completion_logprobs is not None else None),
                finish_reason=finish_reason,
                latency_s=latency_s,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                model=model,
                tool_calls=[dict(c) for c in tool_calls] if tool_calls else None,
                served_by=served_by if served_by is None or isinstance(served_by, ServedBy)
                else ServedBy(**served_by),
                sampling=dict(sampling) if sampling is not None else None,
                history_break=history_break,
                reasoning=reasoning,
            )  # fmt: skip

        event_id = self._emit(ModelCall, build, ts=ts)
        self.num_model_calls += 1
        return event_id

    def tool_call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record a tool call; return its ``call_id`` (generated when not given)."""
        if call_id is None:
            self._call_counter += 1
            call_id = f"call-{self._call_counter}"
        cid = call_id
        self._emit(
            ToolCall,
            lambda: ToolCallPayload(call_id=cid, tool=tool, arguments=dict(arguments or {})),
            ts=ts,
        )
        self.num_tool_calls += 1
        return cid

    def tool_result(
        self,
        call_id: str,
        *,
        exit_code: int | None = None,
        stdout: str | bytes = "",
        stderr: str | bytes = "",
        duration_s: float = 0.0,
        timed_out: bool = False,
        error_kind: ToolErrorKind | None = None,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record the outcome of a tool call.

        ``error_kind`` defaults to ``timeout`` when ``timed_out`` and to
        ``nonzero_exit`` for a non-zero exit code.
        """
        if error_kind is None:
            if timed_out:
                error_kind = "timeout"
            elif exit_code not in (None, 0):
                error_kind = "nonzero_exit"
        kind = error_kind
        rec = self.recorder
        return self._emit(
            ToolResult,
            lambda: ToolResultPayload(
                call_id=call_id,
                exit_code=exit_code,
                stdout=rec.text_output(stdout),
                stderr=rec.text_output(stderr),
                duration_s=duration_s,
                timed_out=timed_out,
                error_kind=kind,
            ),
            ts=ts,
        )

    def sandbox(
        self,
        action: str,
        *,
        backend: str,
        sandbox_id: str,
        image: str | None = None,
        snapshot_ref: str | None = None,
        usage: ResourceUsage | Mapping[str, Any] | None = None,
        detail: str | None = None,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record a sandbox lifecycle step (``acquired``, ``reset``, ``crashed``, ...)."""
        return self._emit(
            SandboxEvent,
            lambda: SandboxPayload(
                action=action,  # type: ignore[arg-type]
                backend=backend,
                sandbox_id=sandbox_id,
                image=image,
                snapshot_ref=snapshot_ref,
                usage=None if usage is None else _coerce(usage, ResourceUsage),
                detail=detail,
            ),
            ts=ts,
        )

    def sandbox_step(self, payload: SandboxPayload) -> str:
        """Record a lifecycle step given as a payload: the listener a sandbox pool calls.

        ``pool.lease(listener=episode.sandbox_step)`` puts every step of the
        leased sandbox (acquired, reset, snapshot, restore, crashed, released)
        into this episode.
        """
        return self._emit(SandboxEvent, lambda: payload, ts=None)

    def reward(
        self,
        *,
        judge_name: str,
        judge_version: str,
        score: float,
        verdict: str,
        judge_spec: Mapping[str, Any] | None = None,
        components: Mapping[str, float] | None = None,
        evidence: Any = None,
        flags: Sequence[str] = (),
        ts: dt.datetime | None = None,
    ) -> str:
        """Record a judge's verdict (source ``online``) from its fields."""
        try:
            payload = RewardPayload(
                judge_name=judge_name,
                judge_version=judge_version,
                judge_spec=dict(judge_spec or {}),
                score=score,
                components=dict(components or {}),
                verdict=verdict,  # type: ignore[arg-type]
                evidence=evidence if evidence is not None else {},
                flags=list(flags),
            )
        except ValidationError as exc:
            raise translate_validation_error(exc, "reward", prefix="payload") from exc
        return self.record_reward(payload, ts=ts)

    def record_reward(self, payload: RewardPayload, *, ts: dt.datetime | None = None) -> str:
        """Record a judge's verdict as it comes from the judge (``Judgement.to_payload()``)."""
        event_id = self._emit(Reward, lambda: payload, ts=ts)
        self.last_verdict = payload.verdict
        return event_id

    def annotate(
        self, key: str, value: Any = None, *, author: str | None = None, ts: dt.datetime | None = None
    ) -> str:
        """Attach a note to the episode."""
        return self._emit(Annotation, lambda: AnnotationPayload(key=key, value=value, author=author), ts=ts)

    def end(
        self,
        status: EpisodeStatus,
        *,
        reason: str | None = None,
        final_state_ref: str | None = None,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record ``episode_ended``; no event may follow it."""
        event_id = self._emit(
            EpisodeEnded,
            lambda: EpisodeEndedPayload(
                status=status,
                num_events=self.seq,
                num_model_calls=self.num_model_calls,
                num_tool_calls=self.num_tool_calls,
                final_state_ref=final_state_ref or self.final_state_ref,
                reason=reason,
            ),
            ts=ts,
        )
        self.ended = status
        return event_id

    # ------------------------------------------------------------- context

    def __enter__(self) -> Episode:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.ended is not None:
            return
        if exc is not None:
            infra = isinstance(exc, self.recorder.infra_errors)
            reason = f"{type(exc).__name__}: {exc}"[:2000]
            self.end("infra_error" if infra else "aborted", reason=reason)
            return
        by_verdict: dict[str, EpisodeStatus] = {
            "pass": "success",
            "fail": "failure",
            "error": "infra_error",  # the judge could not run: not the policy's fault
        }
        status = by_verdict.get(self.last_verdict or "", "aborted")
        why = None if self.last_verdict else "ended without a verdict"
        self.end(status, reason=why)

    # ------------------------------------------------------------- core

    def _emit(self, cls: type[EventBase], build: Any, *, ts: dt.datetime | None) -> str:
        """Validate the payload, frame the envelope, hand it to delivery; return the event id.

        The payload is validated by its pydantic model. The envelope fields are
        made here (a fresh UUIDv7, the next ``seq``, a UTC timestamp, the
        producer validated once), so the wire bytes are composed directly
        instead of validating and serialising the envelope model again on the
        hot path; the tests parse every produced event back to prove the bytes
        are a valid envelope.
        """
        with self._lock:
            if self.ended is not None:
                raise EpisodeStateError(
                    f"episode {self.episode_id} already ended ({self.ended}); no event may follow"
                )
            event_type, tail = _TYPE_TAILS[cls]
            try:
                payload = build()
            except ValidationError as exc:
                raise translate_validation_error(exc, event_type, prefix="payload") from exc
            if ts is None:
                stamp = _now()
            elif ts.tzinfo is None:
                raise SchemaError(
                    f"invalid {event_type} event: ts: timestamp must carry a timezone (UTC)",
                    [("ts", "timestamp must carry a timezone (UTC)")],
                )
            else:
                stamp = ts.astimezone(dt.UTC)
            event_id = new_id() if self._event_ids is None else self._event_ids(self.seq)
            value = b"%s%s%s%d%s%s%s%s}" % (
                b'{"event_id":"',
                event_id.encode(),
                self._episode_head,
                self.seq,
                b',"ts":"',
                stamp.isoformat().encode(),
                tail,
                payload.__pydantic_serializer__.to_json(payload),
            )
            if not self._partition_known:
                # asked once per episode: unknown (a broker that is down) leaves the choice to the
                # sink, which maps the key the same way; asking again would wait on metadata
                rec = self.recorder
                self._partition = rec.delivery.partition_for(rec.topic, self._key)
                self._partition_known = True
            self.recorder.delivery.submit(self.recorder.topic, self._key, value, partition=self._partition)
            self.seq += 1
            if self.events is not None:
                # parsed back from the very bytes sent: what a judge sees is what the log holds
                self.events.append(parse_event(value))
            return event_id


_TYPE_TAILS: dict[type[EventBase], tuple[str, bytes]] = {
    cls: (name, b'","type":"%s","schema_version":%d,"payload":' % (name.encode(), current_version(name)))
    for name, cls in EVENT_TYPES.items()
}
"""Per event class: its type tag and the constant bytes between ``ts`` and the payload."""


@contextmanager
def recording(**kwargs: Any) -> Iterator[EpisodeRecorder]:
    """``EpisodeRecorder.open(**kwargs)`` as a context manager that closes it."""
    rec = EpisodeRecorder.open(**kwargs)
    try:
        yield rec
    finally:
        rec.close()
