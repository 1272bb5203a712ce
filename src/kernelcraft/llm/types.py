"""What goes to a model and what comes back: plain, hashable records, shared by every backend."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0
    top_p: float | None = None
    max_tokens: int = 8192
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
        """Cache and replay key: model, messages, sampling and sample index."""
        body = {"model": self.model, "messages": [asdict(m) for m in self.messages],
                "sampling": asdict(self.sampling), "sample": self.sample}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """A backend's answer, before the client adds cost and timing."""

    text: str
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str = ""


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


@dataclass
class CallRecord:
    """One call as the client saw it, for the store: reply or error, never both."""

    request: ChatRequest
    reply: ChatReply | None
    error: str | None = None
    started_at: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)
