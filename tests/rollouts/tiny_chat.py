"""A byte-level BPE tokenizer with a ChatML-style chat template, trained here (nothing from a model hub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    # Qwen2.5's way with tools (Hermes): the schemas in the system turn, each call a <tool_call> block,
    # each tool output a user turn in <tool_response>; reasoning, when given, in a <think> block
    "{% if tools %}<|im_start|>system\n{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}"
    '\n\n{% endif %}# Tools\n<tools>{% for t in tools %}{{ "\\n" }}{{ t | tojson }}{% endfor %}'
    '{{ "\\n" }}</tools>\n'
    'Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>\n{% endif %}'
    "{% for m in messages %}"
    "{% if m['role'] == 'system' and tools %}"
    "{% elif m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}\n</tool_response>"
    "<|im_end|>\n"
    "{% elif m['role'] == 'assistant' %}<|im_start|>assistant\n"
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m['content'] }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": {{ c['function']['name'] | tojson }}, "
    "\"arguments\": {% if c['function']['arguments'] is string %}{{ c['function']['arguments'] }}"
    "{% else %}{{ c['function']['arguments'] | tojson }}{% endif %}}</tool_call>{% endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML, with tools, tool calls, tool outputs and reasoning as Qwen2.5 and Qwen3 render them."""

LAST_TURN_THINKS = CHAT_TEMPLATE.replace(
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}",
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>"
    "{% elif loop.last %}<think>\n\n</think>\n\n{% endif %}",
)
"""The same, but a conversation's last assistant turn opens an empty ``<think>`` block, as Qwen3's
template draws it (and draws the same turn without one once another turn follows)."""


def chat_tokenizer(
    out: Path, corpus: str, *, vocab_size: int = 400, template: str = CHAT_TEMPLATE, **special: str
) -> Any:
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
    fast.chat_template = template
    fast.save_pretrained(out)
    return fast
