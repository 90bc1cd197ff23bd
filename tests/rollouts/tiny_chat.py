"""A byte-level BPE tokenizer with a ChatML-style chat template, trained here (nothing from a model hub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chat_tokenizer(out: Path, corpus: str, *, vocab_size: int = 400, **special: str) -> Any:
    """Train a tokenizer on ``corpus``, give it the chat template, save it to ``out`` and return it.

    ``special``: the tokenizer's named tokens (``eos_token`` is ``<|im_end|>`` unless given).
    """
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    tok.train_from_iterator([corpus] * 8, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, **{"eos_token": "<|im_end|>", **special}
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast
