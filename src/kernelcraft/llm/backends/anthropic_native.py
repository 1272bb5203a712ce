"""Anthropic's Messages API through the official `anthropic` SDK (the `[anthropic]` extra).
Retries are the client's, not the SDK's."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..errors import EndpointError, LLMError, TransientError
from ..types import ChatRequest, Completion, Usage
from .sdk_errors import api_message, calling, checking, unauthorized

# Besides 429 and 5xx (529 "overloaded" included), statuses the SDK's own retry policy retries:
# request timeout and lock conflict.
_ALSO_TRANSIENT = {408, 409}


def _sdk() -> ModuleType:
    # Imported here, not at the top: the SDK is an optional extra, and a missing one should be a
    # one-line instruction rather than a traceback.
    try:
        import anthropic
    except ImportError:
        raise EndpointError("the Anthropic backend needs its SDK: pip install 'kernelcraft[anthropic]'") from None
    return anthropic


def _retry_after(headers: Any) -> float | None:
    """Seconds the server asks us to wait; Anthropic sends `retry-after-ms` beside `retry-after`."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            return float(headers.get(name, "")) * scale
        except (TypeError, ValueError):
            continue
    return None


class AnthropicNative:
    """`anthropic:NAME`. System messages become the `system` parameter; the sampling seed is
    dropped, since the Messages API has none."""

    def __init__(self, model: str, base_url: str | None, api_key: str | None, key_env: str = "ANTHROPIC_API_KEY") -> None:
        self.sdk = _sdk()
        if not api_key:
            raise EndpointError(f"no Anthropic API key: set the {key_env} environment variable")
        self.model = model
        self.where = base_url or "api.anthropic.com"
        self.unauthorized = unauthorized(self.where, key_env, key_sent=True)
        self.client = self.sdk.Anthropic(base_url=base_url, api_key=api_key, max_retries=0)

    def check(self) -> None:
        with checking(self.sdk, self.where, "the model lookup", on_not_found=self._check_in_model_list,
                      on_unauthorized=self.unauthorized):
            self.client.models.retrieve(self.model, timeout=30)

    def _check_in_model_list(self) -> None:
        """After a 404 for the model: Anthropic's API lists its models, so an unknown name is
        reported with the names it does serve; a server without the Models API (a proxy) is given
        the benefit of the doubt, as the first call will tell."""
        try:
            models = [m.id for m in self.client.models.list(limit=1000, timeout=30).data]
        except self.sdk.APIError:
            return
        if self.model not in models:
            raise EndpointError(f"{self.where} does not serve model {self.model!r} (it serves: {', '.join(models[:8])})")

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        s = request.sampling
        args: dict[str, Any] = {
            "model": request.model, "max_tokens": s.max_tokens, "timeout": timeout,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"],
        }
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        if system:
            args["system"] = system
        # The API version that SDK 2.x speaks refuses sampling parameters (the SDK dropped them);
        # older ones take them. Sent only when the run asks for other than the API's defaults, and
        # then as extra body fields, so that a current API says no rather than they vanish unseen.
        sampling = {k: v for k, v in (("temperature", s.temperature), ("top_p", s.top_p)) if v not in (None, 1.0)}
        if sampling:
            args["extra_body"] = sampling
        with calling(self.sdk, self.where, timeout, lambda e: self._status_error(e, request.model)):
            r = self.client.messages.create(**args)
        blocks = r.content or []
        text = "".join(block.text for block in blocks if getattr(block, "type", "") == "text")
        # Extended thinking comes as its own blocks (output tokens, billed as such): kept apart from the answer.
        thinking = "\n\n".join(block.thinking for block in blocks if getattr(block, "type", "") == "thinking")
        return Completion(text=text, usage=self._usage(r.usage), finish_reason=r.stop_reason, model=r.model or request.model,
                          reasoning=thinking)

    def _status_error(self, e: Any, model: str) -> LLMError:
        status, message = e.status_code, api_message(e)
        if status == 401:
            return EndpointError(self.unauthorized)
        if status == 403:
            return EndpointError(f"{self.where} refused access (permission denied): {message}")
        if status == 404:
            return EndpointError(f"{self.where} does not serve model {model!r}: {message}")
        if status == 429:
            return TransientError(f"rate limited by {self.where}", _retry_after(e.response.headers))
        if status == 529:
            return TransientError(f"{self.where} is overloaded (529)", _retry_after(e.response.headers))
        if status in _ALSO_TRANSIENT or status >= 500:
            return TransientError(f"{self.where} server error {status}", _retry_after(e.response.headers))
        return LLMError(f"{self.where} refused the request ({status}): {message}")

    @staticmethod
    def _usage(u: Any) -> Usage:
        if u is None:
            return Usage()
        # Prompt-cache reads and writes are billed input, but counted apart from input_tokens.
        prompt = (u.input_tokens or 0) + (getattr(u, "cache_creation_input_tokens", 0) or 0) \
            + (getattr(u, "cache_read_input_tokens", 0) or 0)
        return Usage(prompt, u.output_tokens or 0)
