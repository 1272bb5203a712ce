"""Answers from a JSONL file instead of an endpoint: reproduce a recorded run, or script a
conversation. Each line is `{"text": ..., "usage": {...}}`, with `"key"` (a request's key) when
it answers one request; lines without a key are served in order to requests no line names."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ..errors import EndpointError, LLMError
from ..types import ChatRequest, Completion, Usage


class Replay:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._keyed: dict[str, Completion] = {}
        self._queue: list[Completion] = []
        self._lock = threading.Lock()
        if not self.path.is_file():
            return
        for n, line in enumerate(self.path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                c = Completion(text=d["text"], usage=Usage(**d.get("usage", {})), finish_reason=d.get("finish_reason", "stop"),
                               model=d.get("model", "replay"))
            except (ValueError, KeyError, TypeError) as e:
                raise EndpointError(f"{self.path}:{n}: not a replay line ({e})") from None
            if d.get("key"):
                self._keyed[d["key"]] = c
            else:
                self._queue.append(c)

    def check(self) -> None:
        if not self.path.is_file():
            raise EndpointError(f"no replay file at {self.path}")

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        with self._lock:
            if request.key() in self._keyed:
                return self._keyed[request.key()]
            if self._queue:
                return self._queue.pop(0)
        raise LLMError(f"the replay file {self.path} has no answer left for this request")
