"""A messy log with a known answer: what the pipeline tests produce and expect.

Episodes of ~65 events each, with re-sent duplicates, malformed records,
out-of-order and late events, open episodes, episodes with a gap, and rewards
of two judge versions (v2 written later by a re-judge job to the judgements topic).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaProducer

from schemas import new_id
from tests.pipelines.factories import T0, call, ended, model, result, reward, started

EPISODES_TOPIC = "trajlake.episodes"
JUDGEMENTS_TOPIC = "trajlake.judgements"

MALFORMED = [
    b"{not json",
    b'{"event_id": "x", "type": "model_call"}',
    b"\xff\xfe\x00",
    b'{"event_id":"01a2294d-0c7c-7301-b016-16a55f0b673b","episode_id":"q","seq":-1,"type":"annotation",'
    b'"ts":"2026-11-01T00:00:00Z","schema_version":1,"producer":{"worker_id":"w","host":"h","sdk_version":"s"},'
    b'"payload":{"key":"k"}}',
    b"[]",
]


@dataclass
class Truth:
    """What the lake must hold after everything was produced and processed."""

    event_ids: set[str] = field(default_factory=set)
    malformed: int = 0
    completeness: dict[str, str] = field(default_factory=dict)
    status: dict[str, str | None] = field(default_factory=dict)
    steps: int = 0
    rewards: dict[tuple[str, str], str] = field(default_factory=dict)  # (episode, version) -> verdict
    failing: set[tuple[str, str]] = field(default_factory=set)
    samples: int = 0  # rows of the samples table: one per continuous token history


@dataclass
class Workload:
    phase1: list[tuple[str, bytes, bytes]]
    phase2: list[tuple[str, bytes, bytes]]
    truth_after_1: Truth
    truth: Truth


def make_workload(n_episodes: int = 300, seed: int = 5, steps_per_episode: int = 20) -> Workload:
    rng = random.Random(seed)
    p1: list[tuple[str, bytes, bytes]] = []
    p2: list[tuple[str, bytes, bytes]] = []
    t1, t2 = Truth(), Truth()
    for i in range(n_episodes):
        eid = new_id()
        kind = rng.choices(["complete", "open", "gap", "late"], weights=[70, 10, 8, 12])[0]
        passed = rng.random() < 0.4
        docs: list[dict[str, Any]] = [started(eid, task=f"task-{i % 17}")]
        seq = 1
        # the calls' token histories continue one another, except where the template broke one
        history, breaks = [1, 7], set()
        for s in range(steps_per_episode):
            cid = f"c{s}"
            if s and rng.random() < 0.1:
                history = [*history[:-2], 99, history[-1]]  # the previous reply's end token, re-tokenised
                breaks.add(seq)
            completion = [100 + s % 50, 2]
            docs.append(
                model(
                    eid, seq, completion=f"step {s} " + "x" * rng.randint(50, 400), prompt_token_ids=history,
                    completion_token_ids=completion, completion_logprobs=[-0.5, -0.25],
                )
            )  # fmt: skip
            history = [*history, *completion, 50 + s % 40]
            docs.append(call(eid, seq + 1, call_id=cid, command=f"run {s}"))
            last = s == steps_per_episode - 1
            failing_run = last and not passed
            docs.append(
                result(
                    eid,
                    seq + 2,
                    call_id=cid,
                    exit_code=1 if failing_run else 0,
                    stdout=("FAILED test_%d - AssertionError: assert %d == %d" % (i, i, i + 1))
                    if failing_run
                    else "ok " * rng.randint(1, 50),
                )
            )
            seq += 3
        docs.append(reward(eid, seq, "pass" if passed else "fail", version="v1"))
        docs.append(ended(eid, seq + 1, "success" if passed else "failure"))
        if kind == "open":
            docs = docs[:-1]
        dropped: list[dict[str, Any]] = []
        if kind == "gap":
            dropped = [docs.pop(rng.randint(2, len(docs) - 3))]
        late: list[dict[str, Any]] = []
        if kind == "late":
            cut = rng.randint(len(docs) // 2, len(docs) - 1)
            docs, late = docs[:cut], docs[cut:]
        if rng.random() < 0.3:
            rng.shuffle(docs)  # out of order within the episode
        key = eid.encode()
        for d in docs:
            p1.append((EPISODES_TOPIC, key, json.dumps(d).encode()))
            if rng.random() < 0.03:
                p1.append((EPISODES_TOPIC, key, json.dumps(d).encode()))  # re-sent duplicate
        for d in late:
            p2.append((EPISODES_TOPIC, key, json.dumps(d).encode()))
        rejudge = rng.random() < 0.3
        rj_early = False
        if rejudge:
            v2_pass = rng.random() < 0.5
            rj = reward(
                eid,
                0,
                "pass" if v2_pass else "fail",
                version="v2",
                source="rejudge",
                ts=T0 + dt.timedelta(days=1),
            )
            rj_early = rng.random() < 0.5
            (p1 if rj_early else p2).append((JUDGEMENTS_TOPIC, key, json.dumps(rj).encode()))
        # Ground truth.
        all_docs = docs + late
        own_seqs = {d["seq"] for d in all_docs}
        for truth, visible, final in ((t1, docs, False), (t2, all_docs, True)):
            truth.event_ids.update(d["event_id"] for d in visible)
            vis_seqs = {d["seq"] for d in visible}
            truth.steps += len(vis_seqs)
            calls = sorted(d["seq"] for d in visible if d["type"] == "model_call")
            # a row starts at the first call and where the history broke since the previous call seen
            # (a missing call's tokens are context of the next one's prompt: its history continues)
            truth.samples += sum(
                1 for k, c in enumerate(calls) if k == 0 or any(calls[k - 1] < b <= c for b in breaks)
            )
            has_end = any(d["type"] == "episode_ended" for d in visible)
            top = max(vis_seqs)
            gap = any(s not in vis_seqs for s in range(top + 1))
            truth.completeness[eid] = "gap" if gap else ("complete" if has_end else "open")
            truth.status[eid] = ("success" if passed else "failure") if has_end else None
            if any(d["type"] == "reward" for d in visible):
                truth.rewards[(eid, "v1")] = "pass" if passed else "fail"
                if not passed:
                    truth.failing.add((eid, "v1"))
            if rejudge and (final or rj_early):
                truth.rewards[(eid, "v2")] = "pass" if v2_pass else "fail"
                if not v2_pass:
                    truth.failing.add((eid, "v2"))
                truth.event_ids.add(rj["event_id"])
        del own_seqs, dropped
    # Malformed records, anywhere.
    for j in range(40):
        junk = MALFORMED[j % len(MALFORMED)]
        p1.insert(rng.randint(0, len(p1)), (EPISODES_TOPIC, b"junk-%d" % j, junk))
    for j in range(10):
        p2.insert(rng.randint(0, len(p2)), (JUDGEMENTS_TOPIC, b"junk2-%d" % j, MALFORMED[j % len(MALFORMED)]))
    t1.malformed, t2.malformed = 40, 50
    return Workload(p1, p2, t1, t2)


def produce(bootstrap: str, records: list[tuple[str, bytes, bytes]]) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=256 << 10, compression_type="lz4"
    )
    futures = [producer.send(t, key=k, value=v) for t, k, v in records]
    producer.flush()
    for f in futures:
        f.get(30)
    producer.close()


def episodes_by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in rows:
        out[r["episode_id"]] = r
    return out
