"""Backends: each turns a ChatRequest into a Completion, mapping its failures onto
TransientError (retry), EndpointError (the endpoint is unusable) or LLMError (give up)."""

from __future__ import annotations

from typing import Protocol

from ..types import ChatRequest, Completion


class Backend(Protocol):
    def check(self) -> None:
        """Fail now, with EndpointError, if no call can succeed (unreachable, bad key, no model)."""

    def complete(self, request: ChatRequest, timeout: float) -> Completion: ...

    # A backend that holds requests back (batch files) also has `flush() -> str | None`, which hands
    # them over and says what waits, and `survey()`, what it holds for a resumed run; LLMClient.flush
    # and LLMClient.survey call them where they exist.
