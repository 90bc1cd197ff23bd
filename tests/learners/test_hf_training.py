"""A Hugging Face causal LM (a tiny GPT-2 built here) trains through the same lake, dataset and loss."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from ingest.kafka_broker import EmbeddedKafka
from learners import torch_model as tm
from learners.checkpoints import load_checkpoint, load_optimizer_state
from learners.hf_model import HFPolicyModel, load_causal_lm
from learners.serving import CheckpointGenerator
from learners.tokenizer import CharTokenizer
from learners.trainer import TrainArgs, train
from pipelines import PipelineConfig, run_once
from tests.pipelines.factories import ended, model, reward, started, wire
from tests.pipelines.log_workload import produce

pytestmark = pytest.mark.kafka
TOK = CharTokenizer()


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=98, n_positions=64, n_embd=32, n_layer=1, n_head=2,
                                     bos_token_id=TOK.BOS, eos_token_id=TOK.EOS)  # fmt: skip
    path = tmp_path_factory.mktemp("tiny-gpt2")
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    return path


def _logp(policy: torch.nn.Module, prompt: list[int], completion: list[int]) -> float:
    ids = torch.tensor([prompt + completion])
    mask = torch.zeros_like(ids, dtype=torch.float32)
    mask[0, len(prompt) :] = 1
    with torch.no_grad():
        return float(tm.sequence_logprobs(policy, ids, mask).sum())


def _episodes(policy: torch.nn.Module, words: list[str], tag: str) -> list[dict[str, Any]]:
    """Per word, a group of two: the reversed word (reward 1) and the word itself (reward 0)."""
    docs: list[dict[str, Any]] = []
    for w in words:
        prompt = [TOK.BOS, *TOK.encode(f"rev:{w}=")]
        for k, (answer, score) in enumerate(((w[::-1], 1.0), (w, 0.0))):
            completion = [*TOK.encode(answer), TOK.EOS]
            ids = torch.tensor([prompt + completion])
            mask = torch.zeros_like(ids, dtype=torch.float32)
            mask[0, len(prompt) :] = 1
            with torch.no_grad():  # the behaviour log-probs of the model that "sampled" it
                lp = tm.sequence_logprobs(policy, ids, mask)[0, len(prompt) :].tolist()
            eid = f"{tag}-{w}-{k}"
            docs += [
                started(eid, group_id=f"{tag}-{w}", metadata={"group_size": 2}),
                model(eid, 1, completion=answer, prompt_token_ids=prompt, completion_token_ids=completion,
                      completion_logprobs=lp),
                reward(eid, 2, verdict="pass" if score else "fail", score=score),
                ended(eid, 3),
            ]  # fmt: skip
    return docs


def test_a_hugging_face_model_trains_from_the_lake_and_checkpoints_as_a_hugging_face_directory(
    kafka: EmbeddedKafka, gpt2_dir: Path, tmp_path: Path
) -> None:
    topic = f"t.hf.{os.getpid()}.{random.getrandbits(24):06x}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2}).ensure_topics()
    cfg = PipelineConfig(bootstrap=kafka.bootstrap, lake_root=str(tmp_path / "lake"), topics=(topic,))
    start = HFPolicyModel(load_causal_lm(gpt2_dir))
    words = ["abc", "dog", "sun", "key", "map", "red"]
    # a group recorded by a server with a bigger vocabulary: ids this model has no embedding for
    alien = [
        doc for k in (0, 1) for doc in (
            started(f"oov-{k}", group_id="oov"), reward(f"oov-{k}", 2, score=float(k)), ended(f"oov-{k}", 3),
            model(f"oov-{k}", 1, completion="x", prompt_token_ids=[1, 500], completion_token_ids=[7, 2],
                  completion_logprobs=[-1.0, -1.0]),
        )
    ]  # fmt: skip
    docs = _episodes(start, words, "a") + alien
    produce(kafka.bootstrap, [(topic, d["episode_id"].encode(), wire(d)) for d in docs])
    run_once(cfg)

    args = dict(lake=cfg.lake_root, checkpoint_root=str(tmp_path / "ckpt"), judge_name="tests", epochs=8,
                batch_size=4, lr=3e-3, device="cpu")  # fmt: skip
    res = train(TrainArgs(**args, hf_model=str(gpt2_dir)))
    assert res.checkpoint is not None and res.samples == 12
    info = res.checkpoint
    assert info.model_format == "hf" and info.hf_dir is not None
    assert info.lineage.metrics["samples_excluded"] == {"token_out_of_vocab": 2}
    first = res.metrics[0]
    # on-policy at the first minibatch: the data was scored by the model it starts from
    assert first["logp_mismatch_max"] < 1e-4 and first["clip_frac"] == 0.0
    trained = HFPolicyModel(load_causal_lm(info.hf_dir))  # a complete Hugging Face directory
    gains = []
    for w in words:
        prompt = [TOK.BOS, *TOK.encode(f"rev:{w}=")]
        right, wrong = [*TOK.encode(w[::-1]), TOK.EOS], [*TOK.encode(w), TOK.EOS]
        before = _logp(start, prompt, right) - _logp(start, prompt, wrong)
        gains.append(_logp(trained, prompt, right) - _logp(trained, prompt, wrong) - before)
    assert min(gains) > 0, gains  # every rewarded answer gained on its unrewarded twin
    assert load_optimizer_state(info.path) is not None

    # the next step starts from the Hugging Face checkpoint, with its optimiser, on the new data only
    produce(kafka.bootstrap, [(topic, d["episode_id"].encode(), wire(d))
                              for d in _episodes(trained, ["cat", "sky"], "b")])  # fmt: skip
    run_once(cfg)
    nxt = train(TrainArgs(**args, parent=info.path))
    assert nxt.checkpoint is not None and nxt.samples == 4 and nxt.checkpoint.model_format == "hf"
    assert nxt.checkpoint.lineage.parent_id == info.checkpoint_id
    assert load_checkpoint(nxt.checkpoint.path)[0].config["max_len"] == 64
    # rollout workers serve it in-process like any checkpoint
    completion = CheckpointGenerator(nxt.checkpoint.path, greedy=True, max_new_tokens=8)("rev:abc=")
    assert completion.completion_ids and len(completion.logprobs) == len(completion.completion_ids)
    with pytest.raises(Exception, match="torch backend"):
        train(TrainArgs(**args, hf_model=str(gpt2_dir), backend="jax", incremental=False))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_a_half_precision_checkpoint_trains_with_fp32_master_weights_and_is_written_back_in_its_dtype(
    kafka: EmbeddedKafka, gpt2_dir: Path, tmp_path: Path, dtype: torch.dtype
) -> None:
    """Most released checkpoints are bf16 (older ones fp16): the learner keeps fp32 master weights (numpy
    sees float32, the optimiser updates what bf16 or fp16 would round away) and writes the served copy
    in the checkpoint's own dtype."""
    import json

    import numpy as np

    name = str(dtype).removeprefix("torch.")
    half_dir = tmp_path / f"gpt2-{name}"
    load_causal_lm(gpt2_dir).to(dtype).save_pretrained(half_dir)
    assert load_causal_lm(half_dir).transformer.h[0].attn.c_attn.weight.dtype == dtype
    topic = f"t.hf16.{os.getpid()}.{random.getrandbits(24):06x}"
    EmbeddedKafka(kafka.home, kafka.bootstrap, topics={topic: 2}).ensure_topics()
    cfg = PipelineConfig(bootstrap=kafka.bootstrap, lake_root=str(tmp_path / "lake"), topics=(topic,))
    start = HFPolicyModel(load_causal_lm(half_dir, dtype=torch.float32))
    docs = _episodes(start, ["abc", "dog", "sun", "key"], "h")
    produce(kafka.bootstrap, [(topic, d["episode_id"].encode(), wire(d)) for d in docs])
    run_once(cfg)
    res = train(TrainArgs(lake=cfg.lake_root, checkpoint_root=str(tmp_path / "ckpt"), judge_name="tests",
                          epochs=4, batch_size=4, lr=3e-3, device="cpu", hf_model=str(half_dir)))  # fmt: skip
    assert res.checkpoint is not None and res.samples == 8
    info, _, weights = load_checkpoint(res.checkpoint.path)
    assert all(np.asarray(w).dtype == np.float32 for w in weights.values())  # the master weights
    assert info.lineage.metrics["param_dtype"] == "float32"
    assert res.metrics[0]["logp_mismatch_max"] < 1e-4  # scored as the fp32 master that "sampled" them
    written = json.loads((Path(str(info.hf_dir)) / "config.json").read_text())
    assert written.get("dtype", written.get("torch_dtype")) == name  # (the key's name depends on the version)
    served = load_causal_lm(info.hf_dir)
    assert served.transformer.h[0].attn.c_attn.weight.dtype == dtype
    # the next step continues from the master weights, not from their bf16 rounding
    from learners.trainer import _load_start

    child = TrainArgs(
        lake=cfg.lake_root, checkpoint_root=str(tmp_path / "c"), judge_name="tests", parent=info.path
    )
    start_weights = _load_start(child)[1]
    assert start_weights is not None and all(np.array_equal(start_weights[k], weights[k]) for k in weights)
    master = HFPolicyModel(load_causal_lm(half_dir, dtype=torch.float32))
    master.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
    gen = CheckpointGenerator(info.path, greedy=True, max_new_tokens=6)  # served in-process: the master
    c = gen("rev:abc=")
    assert c.logprobs == pytest.approx(
        tm.sequence_logprobs(master, torch.tensor([c.prompt_ids + c.completion_ids]),
                             torch.tensor([[0] * len(c.prompt_ids) + [1] * len(c.completion_ids)]))[0,
                             len(c.prompt_ids):].tolist(), abs=1e-5)  # fmt: skip


def test_the_in_process_policy_speaks_through_the_models_own_tokenizer_and_chat_template(
    tmp_path: Path,
) -> None:
    import numpy as np

    from learners.checkpoints import Lineage, save_checkpoint
    from learners.config import ModelConfig
    from learners.hf_model import hf_config
    from tests.rollouts.tiny_chat import chat_tokenizer

    src = tmp_path / "src"
    tok = chat_tokenizer(src, 'Write "sun" reversed into answer.txt. nus', vocab_size=300)
    torch.manual_seed(0)
    lm = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=128, head_dim=16, eos_token_id=tok.eos_token_id,
    ))  # fmt: skip
    lm.save_pretrained(src)
    weights = {k: v.numpy() for k, v in HFPolicyModel(lm).state_dict().items()}
    info = save_checkpoint(tmp_path / "ck", policy_id="p", backend="torch",
                           config=ModelConfig.from_dict(hf_config(src)), weights=weights,
                           lineage=Lineage("", {}, None, None, 0), hf_source=src)  # fmt: skip
    assert info.hf_dir is not None and (Path(info.hf_dir) / "tokenizer_config.json").is_file()
    gen = CheckpointGenerator(info.path, seed=3, max_new_tokens=12)
    prompt = 'Write "sun" reversed into answer.txt.\n'
    c = gen(prompt)
    # the prompt is the model's chat template around a user turn, in the model's own ids
    expected = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)  # fmt: skip
    assert tok.decode(c.prompt_ids) == expected and expected.startswith("<|im_start|>user\n")
    assert c.prompt_ids == tok(expected, add_special_tokens=False)["input_ids"]
    assert max(c.prompt_ids + c.completion_ids) < len(tok)
    assert c.text == tok.decode(c.completion_ids, skip_special_tokens=True)
    # and the learner scores those ids as the sampler drew them
    ids = torch.tensor([c.prompt_ids + c.completion_ids])
    mask = torch.tensor([[0] * len(c.prompt_ids) + [1] * len(c.completion_ids)], dtype=torch.float32)
    scored = tm.sequence_logprobs(HFPolicyModel(lm), ids, mask)[0, len(c.prompt_ids) :]
    assert np.allclose(scored.tolist(), c.logprobs, atol=1e-5)
