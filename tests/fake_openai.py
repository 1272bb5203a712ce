"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: serves scripted replies,
rate limits, server errors, slow answers and malformed JSON, and records what it was asked."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .loopback import JSONHandler, LoopbackServer


@dataclass
class Step:
    """One scripted answer: a reply text, or an HTTP error, a delay, or a raw (broken) body."""

    text: str | None = None
    status: int = 200
    delay_s: float = 0.0
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


class FakeOpenAI(LoopbackServer):
    """`with FakeOpenAI(models=["m"]) as srv:` then `base_url=srv.url`. Replies come from `script`
    in order, then from `responder(messages)` if given. Like a real server it answers under `/v1` only
    (`/v1/models`, `/v1/chat/completions`), 404 elsewhere; `model_list=False`: no `/v1/models` either."""

    def __init__(self, models: list[str] | None = None, key: str | None = None,
                 responder: Callable[[list[dict[str, Any]]], str] | None = None, port: int = 0,
                 model_list: bool = True) -> None:
        self.models = models or ["fake-coder"]
        self.key = key
        self.model_list = model_list
        self.responder = responder
        self.script: list[Step] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(JSONHandler):

            def _authorised(self) -> bool:
                if fake.key and self.headers.get("authorization") != f"Bearer {fake.key}":
                    self._send(401, json.dumps({"error": {"message": "invalid api key", "type": "invalid_request_error"}}))
                    return False
                return True

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if not self._authorised():
                    return
                if self.path.rstrip("/") == "/v1/models" and fake.model_list:
                    self._send(200, json.dumps({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "fake"} for m in fake.models]}))
                else:
                    self._send(404, json.dumps({"error": {"message": "not found"}}))

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if not self._authorised():
                    return
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, json.dumps({"detail": "Not Found"}))
                    return
                with fake._lock:
                    fake.requests.append(body)
                    step = fake.script.pop(0) if fake.script else None
                if step is None:
                    step = Step(text=fake.responder(body["messages"]) if fake.responder else "no script left")
                if step.delay_s:
                    time.sleep(step.delay_s)
                if step.raw is not None:
                    self._send(step.status, step.raw, step.headers)
                elif step.status != 200:
                    self._send(step.status, json.dumps({"error": {"message": f"scripted {step.status}", "type": "server_error"}}), step.headers)
                else:
                    text = step.text or ""
                    prompt = sum(len(m["content"].split()) for m in body["messages"])
                    self._send(200, json.dumps({
                        "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": int(time.time()),
                        "model": body.get("model", fake.models[0]),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": prompt, "completion_tokens": len(text.split()), "total_tokens": prompt + len(text.split())},
                    }))

        super().__init__(Handler, port)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "FakeOpenAI":
        super().__enter__()
        return self
