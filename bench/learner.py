"""Learner data path vs training step, and rollout throughput.

Run::

    .venv/bin/python bench/learner.py [--samples N] [--device cpu|cuda] [--parts data,train,rollout]
    .venv/bin/python bench/learner.py --parts curves [--seeds 5] [--plot PNG]

- ``data``: a lake of ``--samples`` two-turn episodes with their chat messages
  (episodes, steps, rewards and samples tables, folded by the pipeline's own
  projection) is read by ``learners.dataset.load_samples`` at pinned versions
  (the ``samples`` table, with column and filter pushdown) and turned into torch
  minibatches (``Batches.torch``): samples/s and loss tokens/s delivered. The
  baseline in the same run: the read path before the ``samples`` table, every
  model call's JSON payload decoded from ``steps``.
- ``train``: the policy-gradient step (sequence log-probs, clipped
  importance-weighted loss, backward, Adam) on minibatches of the same shape:
  samples/s and tokens/s consumed, for the small model (the demo's) and a
  medium one; on CUDA also the GPU's utilization (nvidia-smi, sampled).
- ``rollout``: episodes/s of ``trajlake.loop.rollout`` on wordplay tasks with
  the learner's model in-process, 1 and 2 worker processes (needs root, the
  base image and a broker, which it starts).

- ``memory``: peak memory of one training step per sample for a model with a real
  vocabulary (``--vocab``, default 151,936 as Qwen2's), each mode in a fresh process:
  ``before`` (the whole minibatch's ``[B, T, V]`` float32 logits, then log-softmax),
  ``chunked`` (only completion positions through the output layer, 512 at a time, their
  logits rebuilt in backward) and ``chunked+micro`` (micro-batches of 2 with gradient
  accumulation). CPU: the resident set's high-water mark above the model and Adam state;
  CUDA: the allocator's peak.

- ``curves``: the demo's learning loop in one process, ``--seeds`` times with the real
  rewards and as many with the rewards shuffled among each iteration's samples (the
  control: the same updates, no signal). Same warm start and stopping rule, same
  ``reverse`` strings and held-out split, the ``answer`` judge's own grading function,
  the same learner update (``learners.trainer.update``) and hyperparameters, Adam's
  state carried across iterations, constant-reward groups refilled; only the transport
  (sandboxes, Kafka, Beam, Delta) is left out, which is what lets it run many seeds.
  Prints each run's greedy held-out curve and final-minus-first interval, and plots
  both arms with ``--plot PNG``.

The headroom is data samples/s over train samples/s: data loading is never
the bottleneck when it is >= 10.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this directory's scripts must not shadow the packages they measure

import numpy as np

PROMPT = 'Write "{w}" reversed into answer.txt.\n'


def make_lake(root: Path, n: int, seed: int = 0) -> None:
    """A lake of ``n`` two-turn episodes (4 per group), folded by the pipeline's own projection.

    Each episode: the prompt as chat messages, a first completion, a tool call and its
    output, a second completion whose prompt continues the first call's token history
    (so the two calls are one training sequence), a reward and the end. The events go
    through :func:`pipelines.fold_episode` and the row functions of every table the
    learner reads, as the Beam pipeline writes them.
    """
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from fold.samples import sample_rows
    from learners.tokenizer import CharTokenizer
    from pipelines import episode_row, fold_episode, reward_rows, step_rows
    from schemas import SDK_VERSION, current_version, new_id, parse_event
    from schemas.tables import TABLES

    rng = np.random.default_rng(seed)
    tok = CharTokenizer()
    t0 = dt.datetime.now(dt.UTC)
    rows: dict[str, list[dict[str, Any]]] = {"episodes": [], "steps": [], "rewards": [], "samples": []}

    def event(eid: str, seq: int, kind: str, payload: dict[str, Any]) -> Any:
        return parse_event({
            "event_id": new_id(), "episode_id": eid, "seq": seq, "type": kind,
            "ts": (t0 + dt.timedelta(milliseconds=seq)).isoformat(), "schema_version": current_version(kind),
            "producer": {"worker_id": "bench", "host": "h", "sdk_version": SDK_VERSION}, "payload": payload,
        })  # fmt: skip

    for i in range(n):
        w = "".join(chr(97 + c) for c in rng.integers(0, 26, size=rng.integers(3, 7)))
        eid = f"ep-{i:07d}"
        system = {"role": "system", "content": "You act in a sandbox. Tools: bash, write_file, submit."}
        user = {"role": "user", "content": PROMPT.format(w=w)}
        p1 = [tok.BOS, *tok.encode(PROMPT.format(w=w))]
        c1 = [*tok.encode("cat answer.txt"), tok.EOS]
        out = "no such file\n"
        p2 = [*p1, *c1, *tok.encode(out)]
        c2 = [*tok.encode(w[::-1]), tok.EOS]

        def lp(k: int) -> list[float]:
            return [float(x) for x in -rng.random(k)]

        events = [
            event(eid, 0, "episode_started", {
                "task": {"id": f"t{i // 4}", "family": "bench"}, "policy": {"id": "p", "version": "v0"},
                "group_id": f"g{i // 4}", "sampling": {"temperature": 1.0},
            }),
            event(eid, 1, "model_call", {
                "messages": [system, user], "completion": "cat answer.txt", "prompt_token_ids": p1,
                "completion_token_ids": c1, "completion_logprobs": lp(len(c1)),
            }),
            event(eid, 2, "tool_call", {"call_id": "c1", "tool": "bash", "arguments": {"command": "cat a"}}),
            event(eid, 3, "tool_result", {"call_id": "c1", "exit_code": 1, "stdout": {"text": out, "size": 13}}),  # noqa: E501
            event(eid, 4, "model_call", {
                "messages": [system, user, {"role": "assistant", "content": "cat answer.txt"},
                             {"role": "tool", "content": out, "tool_call_id": "c1"}],
                "completion": w[::-1], "prompt_token_ids": p2, "completion_token_ids": c2,
                "completion_logprobs": lp(len(c2)),
            }),
            event(eid, 5, "reward", {
                "judge_name": "bench", "judge_version": "1", "score": float(rng.random()), "verdict": "pass",
                "source": "online",
            }),
            event(eid, 6, "episode_ended", {"status": "success", "num_events": 6}),
        ]  # fmt: skip
        state = fold_episode(eid, events)
        rows["episodes"].append(episode_row(state))
        rows["steps"] += step_rows(state)
        rows["rewards"] += reward_rows(state)
        rows["samples"] += sample_rows(state)
    for name, table_rows in rows.items():
        write_deltalake(
            str(root / name), pa.Table.from_pylist(table_rows, schema=TABLES[name]), mode="overwrite"
        )


def read_payloads(root: str) -> int:
    """The baseline: the read path before the ``samples`` table (each model call's JSON from ``steps``).

    Returns the number of token ids it rebuilt; what it builds is what the learner needs (prompt,
    completion ids and log-probs per call), so the two paths do the same work for the loss.
    """
    import orjson
    import pyarrow.compute as pc

    from lake import Lake

    lake = Lake(root)
    eps = lake.read("episodes")
    rw = lake.read("rewards")
    keep = set(eps.column("episode_id").to_pylist()) & set(rw.column("episode_id").to_pylist())
    steps = lake.read("steps")
    steps = steps.filter(pc.equal(steps.column("type"), "model_call"))
    tokens = 0
    for eid, raw in zip(
        steps.column("episode_id").to_pylist(), steps.column("payload").to_pylist(), strict=True
    ):
        if eid in keep:
            p = orjson.loads(raw)
            ids = list(p["prompt_token_ids"]) + list(p["completion_token_ids"])
            tokens += len(ids) + len(list(p["completion_logprobs"]))
    return tokens


def bench_data(n: int, batch_size: int) -> dict[str, Any]:
    import torch  # noqa: F401 - imported before timing: its import is not part of the data path

    from learners.config import ModelConfig
    from learners.dataset import Batches, DatasetSpec, load_samples

    with tempfile.TemporaryDirectory() as tmp:
        t_make = time.perf_counter()
        make_lake(Path(tmp), n)
        print(
            f"data: a lake of {n} two-turn episodes folded in {time.perf_counter() - t_make:.1f}s", flush=True
        )
        t0 = time.perf_counter()
        data = load_samples(DatasetSpec(lake=tmp, judge_name="bench"))
        t_read = time.perf_counter() - t0
        t1 = time.perf_counter()
        batches = Batches(data, batch_size=batch_size, max_len=ModelConfig().max_len)  # columnar, as train()
        t_build = time.perf_counter() - t1
        t2 = time.perf_counter()
        tokens = 0
        for b in batches.torch("cpu"):
            tokens += int(b["completion_mask"].sum())
        t_epoch = time.perf_counter() - t2
        t3 = time.perf_counter()
        read_payloads(tmp)
        t_json = time.perf_counter() - t3
    n_s = len(data.samples)
    total = t_read + t_build + t_epoch
    return {
        "samples": n_s,
        "episodes": data.episodes,
        "merged_calls": data.token_history.get("merged_calls", 0),
        "read_s": t_read,
        "build_s": t_build,
        "epoch_s": t_epoch,
        # end to end: Delta at a pinned version -> samples -> padded arrays -> one epoch of torch batches
        "samples_per_s": n_s / total,
        "loss_tokens_per_s": tokens / total,
        # each further epoch over the same samples
        "epoch_samples_per_s": n_s / t_epoch,
        # the baseline: the same episodes read by decoding each model call's JSON from steps
        "json_read_s": t_json,
        "read_speedup_vs_json": t_json / t_read,
    }


class GpuSampler:
    """nvidia-smi utilization samples, every 200 ms, while a block runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                ).stdout.split()
                if out:
                    self.samples.append(float(out[0]))
            except (OSError, ValueError, subprocess.TimeoutExpired):
                return
            self._stop.wait(0.2)

    def __enter__(self) -> GpuSampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(5)


def bench_train(device_name: str, size: str, batch_size: int, seconds: float) -> dict[str, Any]:
    import torch

    from learners.config import ModelConfig
    from learners.dataset import Batches, Sample
    from learners.losses_torch import policy_loss
    from learners.tokenizer import CharTokenizer
    from learners.torch_model import TinyLM, autocast, select_device, sequence_logprobs

    cfg = (
        ModelConfig()
        if size == "small"
        else ModelConfig(d_model=512, n_layers=8, n_heads=8, d_ff=2048, max_len=96)
    )
    device = select_device(device_name)
    rng = np.random.default_rng(0)
    tok = CharTokenizer()
    samples = []
    for i in range(batch_size * 8):
        w = "".join(chr(97 + c) for c in rng.integers(0, 26, size=rng.integers(3, 7)))
        comp = [*tok.encode(w[::-1]), tok.EOS]
        samples.append(
            Sample(
                str(i),
                f"g{i // 4}",
                "t",
                "v",
                float(rng.random()),
                [tok.BOS, *tok.encode(PROMPT.format(w=w))],
                comp,
                list(-rng.random(len(comp))),
            )
        )
    batches = list(Batches(samples, batch_size=batch_size, max_len=cfg.max_len).torch(device))
    model = TinyLM(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)

    def step(b: dict[str, Any]) -> None:
        with autocast(device):
            logp = sequence_logprobs(model, b["input_ids"], b["completion_mask"])
        loss, _ = policy_loss(logp.float(), b["old_logp"], b["advantages"], b["completion_mask"])
        opt.zero_grad()
        loss.backward()
        opt.step()

    for b in batches[:3]:
        step(b)
    if device.type == "cuda":
        torch.cuda.synchronize()
    n = tokens = 0
    util: list[float] = []
    sampler = GpuSampler() if device.type == "cuda" else None
    t0 = time.perf_counter()
    if sampler:
        sampler.__enter__()
    while time.perf_counter() - t0 < seconds:
        for b in batches:
            step(b)
            n += b["input_ids"].shape[0]
            tokens += int((b["input_ids"] != 0).sum())
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    if sampler:
        sampler.__exit__()
        util = sampler.samples
    return {
        "model": size,
        "params": sum(p.numel() for p in model.parameters()),
        "device": str(device),
        "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
        "samples_per_s": n / elapsed,
        "tokens_per_s": tokens / elapsed,
        "gpu_util_mean": float(np.mean(util)) if util else None,
    }


def bench_rollout(episodes_per_worker: int) -> dict[str, Any]:
    from ingest.kafka_broker import EmbeddedKafka
    from judges.tasks import find_task_dirs, load_task
    from learners.trainer import supervised_warm_start
    from trajlake.loop import rollout
    from trajlake.settings import Settings

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ["TRAJLAKE_HOME"] = tmp
        os.environ["TRAJLAKE_KAFKA_BOOTSTRAP"] = f"127.0.0.1:{port}"
        settings = Settings()
        broker = EmbeddedKafka(Path(tmp), settings.kafka_bootstrap, topics=settings.topics)
        broker.start()
        try:
            root = Path(__file__).resolve().parents[1] / "tasks" / "wordplay"
            tasks = [load_task(d) for d in find_task_dirs([root])]
            ckpt = supervised_warm_start(
                [(PROMPT.format(w="abc"), "cba")], checkpoint_root=f"{tmp}/ck", steps=5
            )
            for workers in (1, 2):
                n = episodes_per_worker * workers
                t0 = time.perf_counter()
                res = rollout(
                    settings,
                    tasks[:n],
                    f"local:{ckpt.path}?seed=1",
                    group_size=1,
                    workers=workers,
                    tag=f"bench{workers}",
                )
                out[workers] = {"episodes": len(res), "episodes_per_s": len(res) / (time.perf_counter() - t0)}
        finally:
            broker.stop()
    return out


MEMORY_MODES = {
    # name: (scored chunk of the output layer, micro-batch size)
    "before": (None, None),  # the [B, T, V] logits of the whole minibatch, as before micro-batching
    "chunked": ("default", None),
    "chunked+micro": ("default", 2),
}


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_probe(spec: dict[str, Any]) -> dict[str, Any]:
    """One training step of ``spec['batch']`` samples in this (fresh) process; its peak memory above
    the model and optimiser state (CPU: the resident set's high-water mark, reset before the step;
    CUDA: the allocator's peak)."""
    import torch

    from learners import torch_model as tm
    from learners.config import ModelConfig
    from learners.losses_torch import policy_loss
    from learners.trainer import micro_batches

    torch.manual_seed(0)
    device = torch.device(spec["device"])
    seq, b = spec["seq"], spec["batch"]
    cfg = ModelConfig(vocab_size=spec["vocab"], d_model=spec["d_model"], n_layers=2, n_heads=4,
                      d_ff=4 * spec["d_model"], max_len=seq)  # fmt: skip
    model = tm.TinyLM(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-5)
    chunk = tm.LOGIT_CHUNK if spec["chunk"] == "default" else spec["chunk"]
    rng = np.random.default_rng(0)

    def minibatch(rows: int, width: int) -> dict[str, Any]:
        ids = torch.from_numpy(rng.integers(3, cfg.vocab_size, size=(rows, width)))
        mask = torch.zeros((rows, width))
        mask[:, width // 2 :] = 1.0  # half prompt, half completion, as a typical agent turn
        return {"input_ids": ids, "completion_mask": mask, "old_logp": -torch.rand(rows, width),
                "advantages": torch.randn(rows), "temperature": torch.full((rows,), 0.7)}  # fmt: skip

    def step(batch: dict[str, Any]) -> None:
        opt.zero_grad()
        for _, share, mb in micro_batches(batch, spec["micro"]):
            mb = {k: v.to(device) for k, v in mb.items()}
            logp = tm.sequence_logprobs(model, mb["input_ids"], mb["completion_mask"], mb["temperature"],
                                        chunk=chunk)  # fmt: skip
            loss, _ = policy_loss(logp, mb["old_logp"], mb["advantages"], mb["completion_mask"])
            (loss * share).backward()
        opt.step()

    step(minibatch(1, 4))  # Adam's state exists from here on: the baseline holds it
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark
        base = _rss_kib("VmRSS") * 1024
    t0 = time.perf_counter()
    step(minibatch(b, seq))
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = _rss_kib("VmHWM") * 1024
    return {"seconds": time.perf_counter() - t0, "peak_bytes": peak - base,
            "params": sum(p.numel() for p in model.parameters())}  # fmt: skip


def bench_memory(device: str, vocab: int, batch: int, seq: int, d_model: int) -> dict[str, Any]:
    """Peak memory of one training step per sample, each mode in a fresh process (see MEMORY_MODES)."""
    out: dict[str, Any] = {"vocab": vocab, "batch": batch, "seq": seq, "d_model": d_model, "modes": {}}
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}  # large frees go back to the OS at once
    for name, (chunk, micro) in MEMORY_MODES.items():
        spec = {"device": device, "vocab": vocab, "batch": batch, "seq": seq, "d_model": d_model,
                "chunk": chunk, "micro": micro}  # fmt: skip
        proc = subprocess.run([sys.executable, __file__, "--memory-probe", json.dumps(spec)],
                              capture_output=True, text=True, env=env, check=False)  # fmt: skip
        if proc.returncode != 0:
            out["modes"][name] = {"error": (proc.stderr.strip().splitlines() or ["killed"])[-1]}
        else:
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            r["peak_mib_per_sample"] = r["peak_bytes"] / batch / 2**20
            out["modes"][name] = r
        print(f"memory {name:>14}: " + json.dumps(out["modes"][name]), flush=True)
    before = out["modes"]["before"].get("peak_mib_per_sample")
    for r in out["modes"].values():
        if before and "peak_mib_per_sample" in r:
            r["vs_before"] = r["peak_mib_per_sample"] / before
    return out


def _curve(
    seed: int, shuffle: bool, iterations: int, held_out: int, overrides: dict[str, float] | None = None
) -> dict[str, Any]:
    """One run of the demo's loop in-process; greedy and sampled held-out successes per iteration.

    ``overrides``: settings other than the demo's, for exploring (``tpi``, ``group``, ``warm_stop``
    and any key of ``RL_HYPERPARAMETERS``).
    """
    import importlib.util
    import random

    import torch

    from judges.builtin.answer import grade
    from learners.checkpoints import load_checkpoint
    from learners.dataset import Sample, SampleSet
    from learners.evaluation import difference_interval
    from learners.tokenizer import CharTokenizer
    from learners.torch_model import TinyLM, generate
    from learners.trainer import TrainArgs, _drop_zero_advantage, supervised_warm_start, update

    def family_file(
        name: str,
    ) -> Any:  # the reverse family's generator and its experiment, from tasks/reverse
        path = Path(__file__).resolve().parents[1] / "tasks" / "reverse" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"bench_reverse_{name}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    torch.set_num_threads(1)
    fam = family_file("make_tasks")
    exp = family_file("experiment")
    extra = dict(overrides or {})
    if "length" in extra:  # one string length for the tasks (the family's LENGTHS are read at call time)
        fam.LENGTHS = (int(extra["length"]), int(extra.pop("length")))
    tpi, group = int(extra.pop("tpi", exp.TASKS_PER_ITERATION)), int(extra.pop("group", exp.GROUP_SIZE))
    warm_stop = float(extra.pop("warm_stop", exp.WARM_STOP_SUCCESS))
    train_temp = float(extra.pop("train_temperature", exp.TRAIN_TEMPERATURE))
    warm_check = int(extra.pop("warm_check", exp.WARM_CHECK_EVERY))
    warm_long = float(extra.pop("warm_long", exp.WARM_LONG_FRACTION))
    split = fam.splits(int(extra.pop("train_tasks", exp.TRAIN_TASKS)), held_out, seed=seed)
    hyper = {
        **exp.RL_HYPERPARAMETERS,
        **{k: type(exp.RL_HYPERPARAMETERS.get(k, 0.0))(v) for k, v in extra.items()},
    }
    pairs, validation = exp.warm_data(
        set(split["train"]) | set(split["eval"]), fam.LENGTHS, seed=seed, long_fraction=warm_long
    )
    tok = CharTokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        ck = supervised_warm_start(
            pairs, checkpoint_root=tmp, steps=1500, lr=2e-3, seed=seed, check_every=warm_check,
            stop_when=lambda net: exp.greedy_success(net, validation) >= warm_stop,
        )  # fmt: skip
        _, cfg, weights = load_checkpoint(ck.path)
    gen = torch.Generator()
    gen.manual_seed(seed)
    rng = random.Random(seed)

    def act(
        model: Any, w: str, greedy: bool, temperature: float = 1.0
    ) -> tuple[list[int], list[int], list[float], float, bool]:
        pid = [tok.BOS, *tok.encode(exp.prompt_of(w))]
        ids, lp = generate(model, pid, max_new_tokens=24, greedy=greedy, generator=gen, eos_id=tok.EOS,
                           temperature=temperature)  # fmt: skip
        checks, score = grade(tok.decode(ids).rstrip("\n"), w[::-1])
        return pid, ids, lp, score, checks["exact"]

    opt_state, rows, nxt = None, [], 0
    for it in range(iterations + 1):
        model = TinyLM(cfg)
        model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
        model.eval()
        rows.append({
            "iteration": it,
            "greedy": sum(act(model, w, True)[4] for w in split["eval"]),
            "sampled": sum(act(model, w, False)[4] for w in split["eval"]),
        })  # fmt: skip
        if it == iterations:
            break
        samples: list[Sample] = []
        batch = [split["train"][(nxt + i) % len(split["train"])] for i in range(tpi)]
        nxt += tpi
        exact = 0
        for rnd in range(exp.REFILL_ROUNDS + 1):
            flat = 0
            for w in batch:
                outs = [act(model, w, False, train_temp) for _ in range(group)]
                exact += sum(o[4] for o in outs)
                if len({round(o[3], 9) for o in outs}) == 1:
                    flat += 1
                samples += [
                    Sample(episode_id=f"{it}-{rnd}-{w}-{k}", group_id=f"{it}-{rnd}-{w}", task_id=w,
                           policy_version="p", reward=o[3], prompt_ids=o[0], completion_ids=o[1],
                           behaviour_logprobs=o[2], temperature=train_temp)
                    for k, o in enumerate(outs)
                ]  # fmt: skip
            if not flat or rnd == exp.REFILL_ROUNDS:
                break
            batch = [split["train"][(nxt + i) % len(split["train"])] for i in range(flat)]
            nxt += flat
        if shuffle:  # the control: the same samples, rewards permuted among them
            rewards = [x.reward for x in samples]
            rng.shuffle(rewards)
            for x, r in zip(samples, rewards, strict=True):
                x.reward = r
        rows[-1] |= {"train_reward": float(np.mean([x.reward for x in samples])),
                     "train_exact": exact / len(samples)}  # fmt: skip
        data = SampleSet.from_samples(samples)
        _, rows[-1]["flat_groups"] = _drop_zero_advantage(data)  # what the learner leaves out
        args = TrainArgs(lake="", checkpoint_root="", judge_name="answer", seed=it, device="cpu",
                         **hyper)  # fmt: skip
        if len(data):
            weights, _, opt_state = update(cfg, weights, data, args, opt_state=opt_state)
    d, low, high = difference_interval(rows[0]["greedy"], held_out, rows[-1]["greedy"], held_out)
    return {"seed": seed, "shuffled": shuffle, "n": held_out, "rows": rows,
            "improvement": {"diff": d, "ci_low": low, "ci_high": high}}  # fmt: skip


def bench_curves(
    seeds: int,
    iterations: int,
    held_out: int,
    plot: Path | None,
    overrides: dict[str, float] | None = None,
    arms: tuple[bool, ...] = (False, True),
    first_seed: int = 0,
) -> dict[str, Any]:
    """Real-reward runs and shuffled-reward controls of the demo's loop; how often each passes the rule."""
    runs = []
    for seed in range(first_seed, first_seed + seeds):
        for shuffle in arms:
            t0 = time.monotonic()
            r = _curve(seed, shuffle, iterations, held_out, overrides)
            r["seconds"] = round(time.monotonic() - t0, 1)
            imp = r["improvement"]
            print(f"curves seed {seed} {'shuffled' if shuffle else 'real    '}: greedy "
                  + " -> ".join(f"{x['greedy'] / held_out:.1%}" for x in r["rows"])
                  + f"; final - first {imp['diff']:+.1%} [{imp['ci_low']:+.1%}, {imp['ci_high']:+.1%}]"
                  f" ({r['seconds']:.0f}s); training reward "
                  + " -> ".join(f"{x['train_reward']:.2f}" for x in r["rows"] if "train_reward" in x)
                  + ", exact "
                  + " -> ".join(f"{x['train_exact']:.0%}" for x in r["rows"] if "train_exact" in x),
                  flush=True)  # fmt: skip
            runs.append(r)
    out: dict[str, Any] = {"runs": runs}
    for arm, shuffled in (("real", False), ("shuffled", True)):
        mine = [r for r in runs if r["shuffled"] is shuffled]
        if not mine:
            continue
        diffs = [r["improvement"]["diff"] for r in mine]
        out[arm] = {
            "runs": len(mine),
            "passed_rule": sum(r["improvement"]["ci_low"] > 0 for r in mine),
            "diff_min": min(diffs), "diff_mean": float(np.mean(diffs)), "diff_max": max(diffs),
        }  # fmt: skip
        print(f"curves {arm}: the success rule (interval above 0) held in {out[arm]['passed_rule']} of "
              f"{len(mine)} runs; final - first from {min(diffs):+.1%} to {max(diffs):+.1%}, mean "
              f"{np.mean(diffs):+.1%}")  # fmt: skip
    if plot is not None:
        _plot_curves(runs, held_out, plot)
        print(f"curves plot: {plot}")
    return out


def _plot_curves(runs: list[dict[str, Any]], n: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from learners.evaluation import wilson

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for r in runs:
        it = [x["iteration"] for x in r["rows"]]
        p = [x["greedy"] / n for x in r["rows"]]
        ci = [wilson(x["greedy"], n) for x in r["rows"]]
        color = "tab:gray" if r["shuffled"] else "tab:blue"
        ax.plot(it, p, "o-" if not r["shuffled"] else "s--", color=color, alpha=0.8)
        ax.fill_between(it, [c[0] for c in ci], [c[1] for c in ci], color=color, alpha=0.08)
    ax.plot([], [], "o-", color="tab:blue", label="real rewards (one line per seed)")
    ax.plot([], [], "s--", color="tab:gray", label="shuffled rewards (control)")
    ax.set_xlabel("iteration")
    ax.set_xticks(sorted({x["iteration"] for r in runs for x in r["rows"]}))
    ax.set_ylabel(f"held-out greedy success (n={n}, 95% Wilson bands)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("the demo's loop: real vs shuffled rewards")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description="learner data path vs training step; rollout throughput")
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--parts", default="data,train,rollout")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--seeds", type=int, default=5, help="runs of each arm of the curves part")
    ap.add_argument("--iterations", type=int, default=4, help="RL iterations of the curves part")
    ap.add_argument("--held-out", type=int, default=200, help="held-out tasks of the curves part")
    ap.add_argument("--plot", type=Path, help="PNG of the curves part")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="curves: a setting other than the demo's (tpi, group, warm_stop, lr, epochs, ...)",
    )
    ap.add_argument("--arms", default="real,shuffled", help="curves: which arms to run")
    ap.add_argument("--first-seed", type=int, default=0, help="curves: the first seed")
    ap.add_argument("--vocab", type=int, default=151_936, help="memory: vocabulary size (Qwen2's)")
    ap.add_argument("--memory-batch", type=int, default=8, help="memory: samples per minibatch")
    ap.add_argument("--seq", type=int, default=256, help="memory: tokens per sample")
    ap.add_argument("--d-model", type=int, default=256, help="memory: model width")
    ap.add_argument("--memory-probe", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_probe:
        print(json.dumps(memory_probe(json.loads(args.memory_probe))))
        return
    parts = args.parts.split(",")
    res: dict[str, Any] = {"cpus": os.cpu_count()}
    if "data" in parts:
        res["data"] = bench_data(args.samples, args.batch_size)
        print("data", json.dumps(res["data"]))
    if "train" in parts:
        res["train"] = [
            bench_train(args.device, size, args.batch_size, args.seconds) for size in ("small", "medium")
        ]
        for t in res["train"]:
            print("train", json.dumps(t))
        if "data" in res:
            res["headroom"] = {
                t["model"]: res["data"]["samples_per_s"] / t["samples_per_s"] for t in res["train"]
            }
            print("headroom (data samples/s / train samples/s)", json.dumps(res["headroom"]))
    if "rollout" in parts:
        res["rollout"] = bench_rollout(8)
        print("rollout", json.dumps(res["rollout"]))
    if "memory" in parts:
        res["memory"] = bench_memory(args.device if args.device != "auto" else "cpu", args.vocab,
                                     args.memory_batch, args.seq, args.d_model)  # fmt: skip
    if "curves" in parts:
        overrides = {k: float(v) for k, v in (x.split("=", 1) for x in args.set)}
        arms = tuple(a == "shuffled" for a in args.arms.split(","))
        res["curves"] = bench_curves(
            args.seeds, args.iterations, args.held_out, args.plot, overrides, arms, args.first_seed
        )
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
