"""What goes to a model and what comes back: plain, hashable records, shared by every backend."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from .limits import DEFAULT_MAX_TOKENS

# Why a reply ended that means it was cut at the token limit: OpenAI-compatible APIs say "length",
# Anthropic "max_tokens" (or "model_context_window_exceeded" when the context ran out first).
CUT_REASONS = frozenset({"length", "max_tokens", "model_context_window_exceeded"})


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0
    top_p: float | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    seed: int | None = None


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[Message, ...]
    sampling: Sampling = Sampling()
    # Which of several samples of the same prompt this is: part of the cache key, so K samples
    # are K calls, and a resumed run gets each one back.
    sample: int = 0
    purpose: str = ""  # the agent role asking ("coder", "planner"...), recorded, not hashed
    task: str = ""  # the task key it is about, recorded, not hashed

    def key(self) -> str:
        """Replay key: model, messages, sampling and sample index (the cache keys it by endpoint too: `cache_key`)."""
        body = {"model": self.model, "messages": [asdict(m) for m in self.messages],
                "sampling": asdict(self.sampling), "sample": self.sample}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0  # billed output, reasoning included
    reasoning_tokens: int = 0  # the part of completion_tokens spent on reasoning, where the provider says

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """A backend's answer, before the client adds cost and timing."""

    text: str  # the answer, without the reasoning
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str = ""
    reasoning: str = ""  # a reasoning model's thinking, kept apart from the answer


@dataclass(frozen=True)
class ChatReply:
    text: str
    usage: Usage
    model: str
    finish_reason: str | None
    latency_s: float
    cost_usd: float | None  # None: no price known for the model
    cached: bool = False
    attempts: int = 1
    reasoning: str = ""

    @property
    def truncated(self) -> bool:
        """The reply was cut at the token limit."""
        return self.finish_reason in CUT_REASONS


@dataclass
class CallRecord:
    """One call as the client saw it, for the store: reply or error, never both."""

    request: ChatRequest
    reply: ChatReply | None
    error: str | None = None
    started_at: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)
