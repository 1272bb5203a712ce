"""Any OpenAI-compatible chat-completions endpoint, through the official `openai` SDK: OpenAI,
vLLM, SGLang, Ollama, llama.cpp's server, DeepSeek... Retries are the client's, not the SDK's."""

from __future__ import annotations

import openai

from ..errors import EndpointError, LLMError, TransientError
from ..types import ChatRequest, Completion
from .openai_format import completion_of
from .sdk_errors import api_message, calling, checking, unauthorized

_PATHS = "/models and /chat/completions"


def _retry_after(e: openai.APIStatusError) -> float | None:
    try:
        return float(e.response.headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None


def no_chat_here(base_url: str, model: str, detail: str) -> str:
    """Why a base URL that answers 404 for the model list and for a chat serves no chat: most often the URL
    lacks the /v1 every OpenAI-compatible server puts its API under (`detail`: the server's own words)."""
    url = base_url.strip().rstrip("/")
    if not url.endswith("/v1"):
        return f"{url} answered 404 for {_PATHS}: is the base URL missing /v1? (try {url}/v1)"
    return f"{url} answered 404 for {_PATHS} ({detail}): is the base URL right, and does it serve model {model!r}?"


class OpenAICompatible:
    def __init__(self, model: str, base_url: str | None, api_key: str | None, key_env: str = "OPENAI_API_KEY") -> None:
        self.model = model
        self.base_url = base_url
        self.where = base_url or "api.openai.com"
        self.unauthorized = unauthorized(self.where, key_env, key_sent=bool(api_key))
        # Local servers take any key; the SDK insists on one.
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=0)

    def check(self) -> None:
        """The model list names the model; a server without a model list (a 404) is asked a one-token chat,
        and a 404 there too means no chat at this URL."""
        models: list[str] | None = None
        with checking(openai, self.where, "the model list", on_not_found=lambda: None, on_unauthorized=self.unauthorized):
            models = [m.id for m in self.client.models.list(timeout=30)]
        if models is None:
            self._check_chat()
        elif models and self.model not in models:
            raise EndpointError(f"{self.where} does not serve model {self.model!r} (it serves: {', '.join(models[:8])})")

    def _check_chat(self) -> None:
        """A one-token chat: only a 404 (or a 401) fails the check; any other answer, a refusal or a slow one
        included, shows a chat endpoint is there, and the run's first call tells the rest."""
        try:
            self.client.chat.completions.create(model=self.model, messages=[{"role": "user", "content": "Say OK."}],
                                                max_tokens=1, timeout=60)
        except openai.NotFoundError as e:
            raise EndpointError(no_chat_here(self.where, self.model, api_message(e))) from None
        except openai.AuthenticationError:
            raise EndpointError(self.unauthorized) from None
        except openai.APITimeoutError:
            return
        except openai.APIConnectionError:
            raise EndpointError(f"cannot reach {self.where}: is the server running and the URL right?") from None
        except openai.APIError:
            return

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
            return EndpointError(self.unauthorized)
        return LLMError(f"{self.where} refused the request ({e.status_code}): {e.message}")
