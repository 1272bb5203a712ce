"""Any OpenAI-compatible chat-completions endpoint, through the official `openai` SDK: OpenAI,
vLLM, SGLang, Ollama, llama.cpp's server, DeepSeek... Retries are the client's, not the SDK's."""

from __future__ import annotations

import json

import openai

from ..errors import EndpointError, LLMError, TransientError
from ..types import ChatRequest, Completion, Usage


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
        try:
            models = [m.id for m in self.client.models.list(timeout=30)]
        except openai.AuthenticationError:
            raise EndpointError(f"{self.where} rejected the API key") from None
        except openai.PermissionDeniedError:
            raise EndpointError(f"{self.where} refused access (permission denied)") from None
        except openai.NotFoundError:
            return  # a server without /models may still serve chat completions
        except (openai.APIConnectionError, openai.APITimeoutError):
            raise EndpointError(f"cannot reach {self.where}: is the server running and the URL right?") from None
        except openai.APIError as e:
            raise EndpointError(f"{self.where} answered the model list with an error: {e.message}") from None
        if models and self.model not in models:
            raise EndpointError(f"{self.where} does not serve model {self.model!r} (it serves: {', '.join(models[:8])})")

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        s = request.sampling
        try:
            r = self.client.chat.completions.create(
                model=request.model, messages=[{"role": m.role, "content": m.content} for m in request.messages],
                temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens, seed=s.seed, timeout=timeout)
        except openai.RateLimitError as e:
            raise TransientError(f"rate limited by {self.where}", _retry_after(e)) from None
        except openai.InternalServerError as e:
            raise TransientError(f"{self.where} server error {e.status_code}") from None
        except openai.APITimeoutError:
            raise TransientError(f"no answer from {self.where} within {timeout:g} s") from None
        except openai.APIConnectionError:
            raise TransientError(f"lost the connection to {self.where}") from None
        except (openai.APIResponseValidationError, json.JSONDecodeError):
            raise TransientError(f"{self.where} sent a malformed answer") from None
        except openai.AuthenticationError:
            raise EndpointError(f"{self.where} rejected the API key") from None
        except openai.APIStatusError as e:
            raise LLMError(f"{self.where} refused the request ({e.status_code}): {e.message}") from None
        if not getattr(r, "choices", None):
            raise TransientError(f"{self.where} sent an answer without choices")
        choice = r.choices[0]
        u = r.usage
        return Completion(text=choice.message.content or "", finish_reason=choice.finish_reason, model=r.model or request.model,
                          usage=Usage(u.prompt_tokens or 0, u.completion_tokens or 0) if u else Usage())
