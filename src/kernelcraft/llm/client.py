"""The client every agent calls: one backend behind a concurrency limit, retries with backoff,
a per-call timeout, token and cost accounting, a hard budget, a response cache, and a record of
every call handed to whoever listens (the store)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .backends import Backend
from .cache import ResponseCache, cache_key
from .config import LLMConfig
from .errors import BudgetExceeded, CallFailed, LLMError, TransientError
from .types import CallRecord, ChatReply, ChatRequest, Completion, Message, Sampling


@dataclass
class Spend:
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # calls to a model with no price in the table

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLMClient:
    def __init__(self, backend: Backend, config: LLMConfig, *, cache: ResponseCache | None = None,
                 on_call: Callable[[CallRecord], None] | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.backend = backend
        self.config = config
        self.cache = cache
        self.on_call = on_call
        self.spend = Spend()
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._lock = threading.Lock()
        self._sleep = sleep

    def check(self) -> None:
        """Raise EndpointError now if the endpoint cannot serve this run."""
        self.backend.check()

    def request(self, messages: Sequence[Message], *, sample: int = 0, purpose: str = "", task: str = "",
                seed: int | None = None) -> ChatRequest:
        c = self.config
        return ChatRequest(model=c.model, messages=tuple(messages), sample=sample, purpose=purpose, task=task,
                           sampling=Sampling(temperature=c.temperature, top_p=c.top_p, max_tokens=c.reply_limit(), seed=seed))

    def flush(self) -> str | None:
        """Hand over the requests the backend held back (the batch backend writes them as one round);
        a line saying which requests wait for replies and where, or None when none waits."""
        flush = getattr(self.backend, "flush", None)  # only a backend that holds requests back has one
        return flush() if flush is not None else None

    def survey(self) -> str | None:
        """What the backend holds for a resumed run (a batch directory: replies matched, requests still
        pending and where, unreadable lines), as a line; None for a backend that holds nothing."""
        survey = getattr(self.backend, "survey", None)
        return survey().summary() if survey is not None else None

    def budget_left(self) -> bool:
        c, s = self.config, self.spend
        return not ((c.budget_tokens is not None and s.tokens >= c.budget_tokens)
                    or (c.budget_usd is not None and s.cost_usd >= c.budget_usd))

    def ready(self, request: ChatRequest) -> bool:
        """Whether `request` would be answered without a model call: its reply is cached, or a backend that
        holds replies (batch files) has it."""
        if self.cache is not None and self.cache.get(cache_key(self.config.endpoint(), request)) is not None:
            return True
        ready = getattr(self.backend, "ready", None)  # only a backend that holds replies has one
        return bool(ready(request)) if ready is not None else False

    def chat(self, request: ChatRequest) -> ChatReply:
        """One reply. Cached answers cost nothing; raises BudgetExceeded once the budget is spent,
        CallFailed when the endpoint failed every try, LLMError when it refused the request."""
        started = time.time()
        key = cache_key(self.config.endpoint(), request)
        hit = self.cache.get(key) if self.cache else None
        if hit is not None:
            reply = self._reply(hit, 0.0, attempts=0, cached=True)
            self._account(reply)
            self._record(CallRecord(request, reply, started_at=started))
            return reply
        if not self.budget_left():
            raise BudgetExceeded(self._budget_message())
        try:
            completion, latency, attempts = self._call_with_retries(request)
        except LLMError as e:
            self._record(CallRecord(request, None, error=str(e), started_at=started))
            raise
        reply = self._reply(completion, latency, attempts=attempts, cached=False)
        if self.cache:
            self.cache.put(key, completion)
        self._account(reply)
        self._record(CallRecord(request, reply, started_at=started))
        return reply

    def _call_with_retries(self, request: ChatRequest) -> tuple[Completion, float, int]:
        c = self.config
        attempt = 0
        while True:
            attempt += 1
            with self._slots:
                t0 = time.perf_counter()
                try:
                    return self.backend.complete(request, c.timeout_s), time.perf_counter() - t0, attempt
                except TransientError as e:
                    if attempt > c.retries:
                        raise CallFailed(f"{e} (gave up after {attempt} attempts)") from None
                    wait = e.retry_after if e.retry_after is not None else c.backoff_s * 2 ** (attempt - 1)
            self._sleep(wait * random.uniform(1.0, 1.25))  # outside the slot: a waiting retry holds no slot

    def _reply(self, completion: Completion, latency: float, attempts: int, cached: bool) -> ChatReply:
        price = self.config.price(completion.model or self.config.model) or self.config.price(self.config.model)
        u = completion.usage
        cost = None if price is None else (u.prompt_tokens * price.input + u.completion_tokens * price.output) / 1e6
        return ChatReply(text=completion.text, usage=u, model=completion.model or self.config.model,
                         finish_reason=completion.finish_reason, latency_s=latency, cost_usd=0.0 if cached else cost,
                         cached=cached, attempts=attempts, reasoning=completion.reasoning)

    def _account(self, reply: ChatReply) -> None:
        with self._lock:
            s = self.spend
            s.calls += 1
            if reply.cached:
                s.cached_calls += 1
                return
            s.prompt_tokens += reply.usage.prompt_tokens
            s.completion_tokens += reply.usage.completion_tokens
            if reply.cost_usd is None:
                s.unpriced_calls += 1
            else:
                s.cost_usd += reply.cost_usd

    def _budget_message(self) -> str:
        c, s = self.config, self.spend
        parts = []
        if c.budget_tokens is not None:
            parts.append(f"{s.tokens:,} of {c.budget_tokens:,} tokens")
        if c.budget_usd is not None:
            parts.append(f"${s.cost_usd:.2f} of ${c.budget_usd:.2f}")
        return "the LLM budget is spent: " + ", ".join(parts)

    def _record(self, record: CallRecord) -> None:
        if self.on_call:
            self.on_call(record)

