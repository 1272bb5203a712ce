"""LLM settings: one pydantic model, filled from a run's TOML file and CLI flags."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator

from .limits import DEFAULT_MAX_TOKENS, by_model, known_max_tokens

PROVIDERS = ("openai", "anthropic", "replay", "batch", "none")  # none: a run that asks no model
# Where a provider's SDK sends requests when no base URL is given.
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalized_url(url: str) -> str:
    """`url` as one spelling of its address: scheme and host in lower case, no default port, no trailing slash."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a port number: the URL as given, the endpoint check will say it is unreachable
        return url.strip().rstrip("/")
    host = (parts.hostname or "") + (f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else "")
    return f"{scheme}://{host}{parts.path.rstrip('/')}" if scheme and parts.hostname else url.strip().rstrip("/")


class Price(BaseModel):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class LLMConfig(BaseModel):
    """Which model, where, and how much of it a run may use."""

    model: str
    provider: str = "openai"
    # OpenAI-compatible servers (vLLM, SGLang, Ollama, llama.cpp...), with their /v1; for
    # "anthropic", the API's host, without /v1 (the SDK adds it).
    base_url: str | None = None
    # The variable holding the key (ANTHROPIC_API_KEY for provider "anthropic"); keys never sit in files.
    api_key_env: str = "OPENAI_API_KEY"
    path: str | None = None  # replay: a JSONL file or run directory; batch: the exchange directory
    concurrency: int = Field(8, ge=1)
    retries: int = Field(5, ge=0)
    backoff_s: float = Field(1.0, ge=0)  # first retry wait; doubles each time, with jitter
    timeout_s: float = Field(600.0, gt=0)
    temperature: float = Field(1.0, ge=0)
    top_p: float | None = None
    # The longest reply: this if set, else the model's entry in max_tokens_per_model, else the
    # provider's documented maximum for the model (limits.KNOWN_MAX_TOKENS), else 32768.
    max_tokens: int | None = Field(None, ge=1)
    max_tokens_per_model: dict[str, int] = Field(default_factory=dict)  # model name or glob -> longest reply
    budget_tokens: int | None = Field(None, ge=1)
    budget_usd: float | None = Field(None, gt=0)
    prices: dict[str, Price] = Field(default_factory=dict)  # model name or glob -> price
    # batch, waiting: how long a round gathers concurrent requests into one requests file.
    batch_window_s: float = Field(2.0, ge=0)
    # batch: how long to wait for a round's replies to appear; 0 answers BatchPending at once and
    # holds the request for the one round written when the run has gone as far as it can
    # (LLMClient.flush), to be resumed once the replies are in.
    batch_wait_s: float = Field(0.0, ge=0)

    @field_validator("provider")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in PROVIDERS:
            raise ValueError(f"unknown provider {v!r}: use one of {', '.join(PROVIDERS)}")
        return v

    @model_validator(mode="after")
    def _anthropic_key(self) -> "LLMConfig":
        if self.provider == "anthropic" and "api_key_env" not in self.model_fields_set:
            self.api_key_env = "ANTHROPIC_API_KEY"
        return self

    @classmethod
    def from_spec(cls, spec: str, **overrides: object) -> "LLMConfig":
        """`--model` as a user writes it: `NAME` (OpenAI-compatible), `anthropic:NAME`,
        `replay:PATH` or `batch:DIR[:NAME]`."""
        provider, _, rest = spec.partition(":")
        if not spec.strip() or (provider in ("anthropic", "openai", "replay", "batch") and not rest.strip()):
            raise ValueError(f"--model {spec!r}: expected NAME, anthropic:NAME, replay:FILE or batch:DIR[:NAME]")
        if provider in ("anthropic", "openai") and rest:
            return cls(model=rest, provider=provider, **overrides)  # type: ignore[arg-type]
        if provider in ("replay", "batch") and rest:
            path, _, name = rest.partition(":")
            return cls(model=name or provider, provider=provider, path=path, **overrides)  # type: ignore[arg-type]
        return cls(model=spec, **overrides)  # type: ignore[arg-type]

    @classmethod
    def no_model(cls, **overrides: object) -> "LLMConfig":
        """The settings of a run that asks no model (a model-free strategy): every call would fail."""
        return cls(model="no model", provider="none", **overrides)  # type: ignore[arg-type]

    def unknown_prefix(self) -> str | None:
        """Why `model` cannot be meant as written: a `prefix:` no provider has, sent to OpenAI's own API (no
        base_url), where no model is named so; None when it can. OpenAI's fine-tuned models ("ft:...") can be."""
        prefix, sep, _ = self.model.partition(":")
        if self.provider != "openai" or not sep or self.base_url is not None or prefix == "ft":
            return None
        return (f"--model {self.model!r}: unknown model prefix {prefix + ':'!r} (use NAME, anthropic:NAME, replay:FILE or "
                f"batch:DIR[:NAME]; a name with ':' served by your own endpoint needs --base-url)")

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env)

    def endpoint(self) -> str:
        """Who answers this run's requests, as one spelling: the provider and its normalized base URL (the SDK's
        default where none is given), or the replay or batch path. Cached replies are keyed by it, so a reply
        one endpoint gave is never taken as another's."""
        if self.provider in DEFAULT_BASE_URLS:
            return f"{self.provider}:{normalized_url(self.base_url or DEFAULT_BASE_URLS[self.provider])}"
        return f"{self.provider}:{self.path or ''}"

    def price(self, model: str) -> Price | None:
        return by_model(self.prices, model)

    def reply_limit(self) -> int:
        """The `max_tokens` a request of this run asks for (see `max_tokens`)."""
        if self.max_tokens is not None:
            return self.max_tokens
        return by_model(self.max_tokens_per_model, self.model) or known_max_tokens(self.model) or DEFAULT_MAX_TOKENS

    @field_validator("max_tokens_per_model")
    @classmethod
    def _positive(cls, v: dict[str, int]) -> dict[str, int]:
        bad = [f"{name}={n}" for name, n in v.items() if n < 1]
        if bad:
            raise ValueError(f"a longest reply must be at least 1 token: {', '.join(bad)}")
        return v
