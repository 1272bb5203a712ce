"""The response cache: a reply per request and endpoint, one JSON file each, safe across processes."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

from .types import ChatRequest, Completion, Usage


def cache_key(endpoint: str, request: ChatRequest) -> str:
    """A request's key in the cache: its own key (model, messages, sampling, sample) and the endpoint that answers it
    (`LLMConfig.endpoint`), so a reply from one server never answers a run pointed at another."""
    return hashlib.sha256(f"{endpoint}\n{request.key()}".encode()).hexdigest()


class ResponseCache(Protocol):
    def get(self, key: str) -> Completion | None: ...

    def put(self, key: str, completion: Completion) -> None: ...


class DirectoryCache:
    """`<dir>/<key[:2]>/<key>.json`; written to a temporary name and renamed, so a reader never
    sees half a file. `refresh`: nothing is read (every request is asked again), new replies replace the old."""

    def __init__(self, root: Path, refresh: bool = False) -> None:
        self.root = Path(root)
        self.refresh = refresh

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        if self.refresh:
            return None
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return Completion(text=data["text"], usage=Usage(**data["usage"]), finish_reason=data.get("finish_reason"),
                          model=data.get("model", ""), reasoning=data.get("reasoning", ""))

    def put(self, key: str, completion: Completion) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(completion)))
        tmp.replace(path)
