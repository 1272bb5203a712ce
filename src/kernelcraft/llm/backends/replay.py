"""Answers without an endpoint: from a recorded run (its folder `<workspace>/runs/<run>`, whose
`llm/` holds every prompt and reply) or from a JSONL file that scripts a conversation.

A recorded run answers each request with the reply recorded for the same messages, sampling and
sample index, whatever the model is called now. A JSONL line is `{"text": ..., "usage": {...}}`,
with `"key"` (a request's key) when it answers one request; lines without a key are served in
order to requests no line names."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

from ..errors import CallFailed, EndpointError
from ..recording import RecordingError, replayable_calls
from ..types import ChatRequest, Completion, Usage


def _any_model(request: ChatRequest) -> str:
    """The request's key with the model left out: a recorded run replays under any model name."""
    return replace(request, model="").key()


class Replay:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._keyed: dict[str, Completion] = {}
        self._queue: list[Completion] = []
        self._lock = threading.Lock()
        if self.path.is_dir():
            self._load_run(self.path / "llm" if (self.path / "llm").is_dir() else self.path)
        elif self.path.is_file():
            self._load_jsonl()

    def _load_run(self, folder: Path) -> None:
        try:
            calls = replayable_calls(folder)
        except RecordingError as e:
            raise EndpointError(str(e)) from None
        for request, completion in calls:
            self._keyed[_any_model(request)] = completion

    def _load_jsonl(self) -> None:
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
        if not self.path.exists():
            raise EndpointError(f"no replay file or recorded run at {self.path}")
        if not self._keyed and not self._queue:
            raise EndpointError(f"{self.path} holds no replies to replay")

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        with self._lock:
            for key in (request.key(), _any_model(request)):
                if key in self._keyed:
                    return self._keyed[key]
            if self._queue:
                return self._queue.pop(0)
        raise CallFailed(f"the replay file {self.path} has no answer left for this request")
