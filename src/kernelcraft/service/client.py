"""`JudgeClient`: what a rollout worker uses to have the judge service evaluate candidates.

    with JudgeClient("http://judge-host:8765", token) as judge:
        verdict = judge.evaluate("leaky_relu_clamp", source)

Every request can be repeated safely (a submission always carries an idempotency key), so the client
rides through a restart of the service: requests that cannot reach it are retried for `retry_s`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from ..judge import Verdict
from .models import API_PREFIX, Health, JobView, SubmitRequest, SubmitResponse

FINISHED = ("done", "failed")


class ServiceError(Exception):
    """The judge service refused a request or could not be reached; the message is one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, None when the service could not be reached


class JudgeClient:
    """A connection to a `kernelcraft serve-judge`; thread-safe (one client per thread is cheapest)."""

    def __init__(self, url: str, token: str, timeout: float = 30.0, retry_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.retry_s = retry_s
        self._http = httpx.Client(base_url=self.url + API_PREFIX, headers={"Authorization": f"Bearer {token}"},
                                  timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "JudgeClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, retry_s: float | None = None) -> Any:
        deadline = time.monotonic() + (self.retry_s if retry_s is None else retry_s)
        while True:
            try:
                r = self._http.request(method, path, json=body)
                break
            except httpx.TransportError as e:
                if time.monotonic() >= deadline:
                    raise ServiceError(f"cannot reach the judge service at {self.url}: {e}") from None
                time.sleep(0.5)
        if r.status_code == 401:
            raise ServiceError(f"the judge service at {self.url} refused the token (401)", 401)
        if r.is_error:
            try:
                detail = r.json()["detail"]
            except (ValueError, KeyError, TypeError):
                detail = r.text[:300]
            raise ServiceError(f"judge service: {detail} ({r.status_code})", r.status_code)
        return r.json()

    def health(self) -> Health:
        """The service's device, workers and jobs by status; not retried, so it doubles as a readiness check."""
        return Health.model_validate(self._call("GET", "/health", retry_s=0))

    def submit(self, task: str | None, source: str, *, task_source: str | None = None, task_name: str | None = None,
               sizes: dict[str, Any] | None = None, client_key: str | None = None, fresh: bool = False) -> int:
        """Queue `source` for a task: `task` a spec the server resolves (a bundled example, "hgemm/MxNxK", a .py
        file under one of its task roots), or task=None with `task_source` and `task_name`. Returns the job id; the
        same `client_key` always returns the same job."""
        request = SubmitRequest(source=source, task=task, task_source=task_source, task_name=task_name,
                                sizes=sizes or {}, client_key=client_key or uuid.uuid4().hex, fresh=fresh)
        reply = self._call("POST", "/jobs", request.model_dump(exclude_none=True))
        return SubmitResponse.model_validate(reply).job_id

    def get(self, job_id: int) -> JobView:
        """The job now: queued, running, done (with its verdict) or failed (with its error)."""
        return JobView.model_validate(self._call("GET", f"/jobs/{job_id}"))

    def result(self, job_id: int, poll_s: float = 0.5, timeout_s: float | None = None) -> JobView:
        """The job once it is done or failed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            view = self.get(job_id)
            if view.status in FINISHED:
                return view
            if deadline is not None and time.monotonic() >= deadline:
                raise ServiceError(f"job {job_id} is still {view.status} after {timeout_s:g} s")
            time.sleep(poll_s)

    def wait(self, job_id: int, poll_s: float = 0.5, timeout_s: float | None = None) -> Verdict:
        """The job's verdict. Raises ServiceError if the job failed (its task could not be run). A verdict of status
        judge_error (the judge's own failure, JobView.judge_error) comes back as it is: rewards.coder_reward gives it
        no reward and rejects the turn."""
        view = self.result(job_id, poll_s, timeout_s)
        if view.verdict is None:
            raise ServiceError(f"job {job_id} failed: {view.error}")
        return Verdict.from_dict(view.verdict)

    def evaluate(self, task: str | None, source: str, **submit: Any) -> Verdict:
        """submit + wait: the verdict of `source` on `task` (keywords as `submit` takes them)."""
        return self.wait(self.submit(task, source, **submit))
