"""A real Anthropic Messages API server on 127.0.0.1 for tests: serves scripted replies,
rate limits, overloads, server errors, slow answers and malformed JSON, answers the Models API,
and records what it was asked."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from .loopback import JSONHandler, LoopbackServer

from .fake_openai import Step

# The error type Anthropic's API puts in the body for each status.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def _words(content: Any) -> int:
    """Token stand-in: words in a string or in a list of text blocks."""
    if isinstance(content, str):
        return len(content.split())
    return sum(len(block.get("text", "").split()) for block in content or [])


class FakeAnthropic(LoopbackServer):
    """`with FakeAnthropic(models=["m"]) as srv:` then `base_url=srv.url`. Messages come from
    `script` (fake_openai's Step) in order, then "no script left". Usage counts words: the
    system prompt's and the messages' as input tokens, the reply's as output tokens."""

    def __init__(self, models: list[str] | None = None, key: str | None = None) -> None:
        self.models = models or ["claude-fake"]
        self.key = key
        self.script: list[Step] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(JSONHandler):

            def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
                self._send(status, json.dumps({"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"),
                                                                          "message": message}}), headers)

            def _authorised(self) -> bool:
                # SDK 2.x sends the key as a bearer token, older ones as x-api-key; the API takes both.
                bearer = (self.headers.get("authorization") or "").removeprefix("Bearer ")
                if fake.key and fake.key not in (self.headers.get("x-api-key"), bearer):
                    self._error(401, "invalid x-api-key")
                    return False
                return True

            def _model(self, name: str) -> dict[str, Any]:
                return {"type": "model", "id": name, "display_name": name.title(), "created_at": "2025-01-01T00:00:00Z"}

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if not self._authorised():
                    return
                path = self.path.split("?")[0].rstrip("/")
                if path == "/v1/models":
                    data = [self._model(m) for m in fake.models]
                    self._send(200, json.dumps({"data": data, "has_more": False, "first_id": fake.models[0],
                                                "last_id": fake.models[-1]}))
                elif path.startswith("/v1/models/") and path.removeprefix("/v1/models/") in fake.models:
                    self._send(200, json.dumps(self._model(path.removeprefix("/v1/models/"))))
                else:
                    self._error(404, f"model: {path.removeprefix('/v1/models/')}")

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if not self._authorised():
                    return
                if self.path.split("?")[0] != "/v1/messages":
                    self._error(404, "not found")
                    return
                if body.get("model") not in fake.models:
                    self._error(404, f"model: {body.get('model')}")
                    return
                if sampling := [k for k in ("temperature", "top_p", "top_k") if k in body]:
                    # As the API version that SDK 2.x sends does.
                    self._error(400, f"{sampling[0]}: Extra inputs are not permitted")
                    return
                with fake._lock:
                    fake.requests.append(body)
                    step = fake.script.pop(0) if fake.script else Step(text="no script left")
                if step.delay_s:
                    time.sleep(step.delay_s)
                if step.raw is not None:
                    self._send(step.status, step.raw, step.headers)
                elif step.status != 200:
                    self._error(step.status, f"scripted {step.status}", step.headers)
                else:
                    text = step.text or ""
                    prompt = _words(body.get("system")) + sum(_words(m["content"]) for m in body["messages"])
                    self._send(200, json.dumps({
                        "id": f"msg_{len(fake.requests)}", "type": "message", "role": "assistant", "model": body["model"],
                        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                        "usage": {"input_tokens": prompt, "output_tokens": len(text.split())},
                    }), step.headers)

        super().__init__(Handler)
        # The SDK's base URL is the host: it adds /v1/... itself.
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "FakeAnthropic":
        super().__enter__()
        return self
