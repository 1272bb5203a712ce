"""Any OpenAI-compatible chat-completions endpoint, through the official `openai` SDK: OpenAI,
vLLM, SGLang, Ollama, llama.cpp's server, DeepSeek... Retries are the client's, not the SDK's."""

from __future__ import annotations

import openai

from ..errors import EndpointError, LLMError, TransientError
from ..types import ChatRequest, Completion
from .openai_format import completion_of
from .sdk_errors import calling, checking


def _retry_after(e: openai.APIStatusError) -> float | None:
    try:
        return float(e.response.headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None


class OpenAICompatible:
    def __init__(self, model: str, base_url: str | None, api_key: str | None) -> None:
        self.model = model
        self.where = base_url or "api.openai.com"
        # Local servers take any key; the SDK insists on one.
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=0)

    def check(self) -> None:
        models: list[str] = []  # a server without /models (a 404) may still serve chat completions
        with checking(openai, self.where, "the model list", on_not_found=lambda: None):
            models = [m.id for m in self.client.models.list(timeout=30)]
        if models and self.model not in models:
            raise EndpointError(f"{self.where} does not serve model {self.model!r} (it serves: {', '.join(models[:8])})")

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        s = request.sampling
        with calling(openai, self.where, timeout, self._status_error):
            r = self.client.chat.completions.create(
                model=request.model, messages=[{"role": m.role, "content": m.content} for m in request.messages],
                temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens, seed=s.seed, timeout=timeout)
        if not getattr(r, "choices", None):
            raise TransientError(f"{self.where} sent an answer without choices")
        return completion_of(r.choices[0], r.usage, r.model or request.model)

    def _status_error(self, e: openai.APIStatusError) -> LLMError:
        if e.status_code == 429:
            return TransientError(f"rate limited by {self.where}", _retry_after(e))
        if e.status_code >= 500:
            return TransientError(f"{self.where} server error {e.status_code}")
        if e.status_code == 401:
            return EndpointError(f"{self.where} rejected the API key")
        return LLMError(f"{self.where} refused the request ({e.status_code}): {e.message}")
