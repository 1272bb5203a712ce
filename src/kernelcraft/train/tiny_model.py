"""A tiny randomly initialised causal LM for smoke tests and throughput runs of the RL loop.

A random model writes no kernels, so every reward would be equal and GRPO would learn nothing. Its
vocabulary therefore holds whole candidates as single tokens (each in a ```python block that starts
and ends a line): random answers then reach the judge and get different, real verdicts. Built and
saved locally; nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")
WORDS = ("[PAD]", "</s>", "[UNK]", "the", "kernel", "is", "here", "fast")


def candidate_token(source: str) -> str:
    """The token text of one candidate: a fenced block that starts and ends a line, so the parser finds
    it wherever the token falls in a reply."""
    return f"\n```python\n{source.rstrip()}\n```\n"


def tiny_model(path: Path, candidates: Sequence[str], *, hidden: int = 64, seed: int = 0) -> Path:
    """Save a 2-layer Llama with random weights and its word-level tokenizer (a few words, the chat
    markers, one token per candidate source) to `path`, a checkpoint any engine loads by path."""
    base = Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    base.pre_tokenizer = Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=base, unk_token="[UNK]", pad_token="[PAD]", eos_token="</s>",
                                        padding_side="left")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]})
    tokenizer.add_tokens([AddedToken(candidate_token(c), normalized=False) for c in candidates])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=8192,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(path)
    return path
