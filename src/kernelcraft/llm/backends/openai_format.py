"""The parts of an OpenAI-format chat completion that every OpenAI-compatible source reads alike
(the SDK's objects and the batch API's JSON): a choice's answer and reasoning, and the usage."""

from __future__ import annotations

from typing import Any

from ..types import Completion, Usage

# Where OpenAI-compatible servers put a reasoning model's thinking: DeepSeek, vLLM and SGLang in
# `reasoning_content`, OpenRouter, Ollama and newer vLLM in `reasoning`.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _plain(value: Any) -> Any:
    """A dict for an SDK object (extra fields included), the value itself otherwise."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def usage_of(usage: Any) -> Usage:
    """Tokens of a completion's `usage` (a dict or the SDK's object; None gives zeros)."""
    u = _plain(usage) or {}
    details = u.get("completion_tokens_details") or {}
    return Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0, details.get("reasoning_tokens") or 0)


def completion_of(choice: Any, usage: Any, model: str) -> Completion:
    """A choice of a chat completion (a dict or the SDK's object) as a Completion: the answer in
    `text`, the reasoning apart, so the code parse never sees it."""
    c = _plain(choice)
    message = c["message"]
    reasoning = next((r for f in REASONING_FIELDS if isinstance(r := message.get(f), str) and r), "")
    return Completion(text=message.get("content") or "", usage=usage_of(usage), finish_reason=c.get("finish_reason"),
                      model=model, reasoning=reasoning)
