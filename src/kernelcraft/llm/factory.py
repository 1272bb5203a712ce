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
    """The backend for `config.provider`; raises EndpointError when it cannot be built (an
    optional SDK missing, no API key)."""
    if config.provider == "openai":
        from .backends.openai_compat import OpenAICompatible

        return OpenAICompatible(config.model, config.base_url, config.api_key(), key_env=config.api_key_env)
    if config.provider == "replay":
        from .backends.replay import Replay

        return Replay(Path(config.path or "replay.jsonl"))
    if config.provider == "anthropic":
        from .backends.anthropic_native import AnthropicNative

        return AnthropicNative(config.model, config.base_url, config.api_key(), key_env=config.api_key_env)
    if config.provider == "batch":
        from .backends.batch import Batch

        # The client lets at most `concurrency` calls in at once, so a round that holds that many
        # is complete: no need to wait out the window.
        return Batch(Path(config.path or "batch"), window_s=config.batch_window_s, wait_s=config.batch_wait_s,
                     round_size=config.concurrency)
    if config.provider == "none":
        from .backends.none import NoModel

        return NoModel()
    raise EndpointError(f"unknown provider {config.provider!r}")


def make_client(config: LLMConfig, *, cache_dir: Path | None = None, refresh_cache: bool = False,
                on_call: Callable[[CallRecord], None] | None = None, backend: Backend | None = None) -> LLMClient:
    """A client for `config`, caching replies under `cache_dir` when given (`refresh_cache`: asking every request
    again, its new reply replacing the cached one); `backend`: one built already (a lane of a shared batch
    directory), else `config`'s."""
    cache = DirectoryCache(cache_dir, refresh=refresh_cache) if cache_dir else None
    return LLMClient(backend or make_backend(config), config, cache=cache, on_call=on_call)
