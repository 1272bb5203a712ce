"""The backend a configuration names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .backends import Backend
from .cache import DirectoryCache
from .client import LLMClient
from .config import LLMConfig
from .errors import EndpointError
from .types import CallRecord


def make_backend(config: LLMConfig) -> Backend:
    if config.provider == "openai":
        from .backends.openai_compat import OpenAICompatible

        return OpenAICompatible(config.model, config.base_url, config.api_key())
    if config.provider == "replay":
        from .backends.replay import Replay

        return Replay(Path(config.path or "replay.jsonl"))
    raise EndpointError(f"the {config.provider} backend is not available in this version")


def make_client(config: LLMConfig, *, cache_dir: Path | None = None,
                on_call: Callable[[CallRecord], None] | None = None) -> LLMClient:
    """A client for `config`, caching replies under `cache_dir` when given."""
    return LLMClient(make_backend(config), config, cache=DirectoryCache(cache_dir) if cache_dir else None, on_call=on_call)
