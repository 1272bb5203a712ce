"""The judge service's HTTP API (FastAPI): submit a candidate, read its job, check the service's health.
Every route but health needs the service's bearer token."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Optional

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..judge import Status
from ..settings import one_line
from ..store.jobs import JobRow
from ..tasks import TaskError
from .models import API_PREFIX, Health, JobView, SubmitRequest, SubmitResponse
from .queue import JobQueue
from .resolve import request_task


class VerdictJSONResponse(JSONResponse):
    """JSON as Python's json module writes it, as the store keeps verdicts: a non-finite number in a verdict
    (an infinite speedup, a NaN quantile) reaches the client as it is, instead of failing the response."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=True).encode()


def create_app(queue: JobQueue, token: str, task_roots: Sequence[Path] = ()) -> FastAPI:
    """The API over `queue`, which the app starts and stops with itself; clients may name the task files under
    `task_roots` (`resolve.request_task`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        queue.start()
        try:
            yield
        finally:
            queue.stop()

    # No OpenAPI pages: every route but health is behind the token, and JudgeClient is the documented interface.
    app = FastAPI(title="kernelcraft judge", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    bearer = HTTPBearer(auto_error=False)  # our own 401, the same in every FastAPI version

    def authorized(credentials: Optional[HTTPAuthorizationCredentials] = Depends(bearer)) -> None:
        if credentials is None or not secrets.compare_digest(credentials.credentials.encode(), token.encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": one_line(exc, skip=("body",))}, status_code=422)

    jobs = APIRouter(prefix=API_PREFIX, dependencies=[Depends(authorized)])

    @jobs.post("/jobs", response_model=SubmitResponse)
    def submit(request: SubmitRequest, response: Response) -> SubmitResponse:
        try:
            task = request_task(request, queue.device.kind, task_roots)
        except TaskError as e:
            raise HTTPException(400, str(e)) from None
        job, created = queue.submit(task, request.source, client_key=request.client_key, fresh=request.fresh)
        response.status_code = 201 if created else 200
        return SubmitResponse(job_id=job.id, created=created)

    @jobs.get("/jobs/{job_id}", response_class=VerdictJSONResponse)
    def get_job(job_id: int) -> VerdictJSONResponse:
        try:
            job = queue.store.job(job_id)
        except KeyError:
            raise HTTPException(404, f"no job {job_id}") from None
        return VerdictJSONResponse(_view(queue, job).model_dump())

    @app.get(f"{API_PREFIX}/health", response_model=Health)
    def health() -> Health:
        counts, judge_errors = queue.store.job_counts(), queue.store.job_judge_errors()
        return Health(device=queue.device.kind, device_name=queue.device.name, workers=queue.workers,
                      **{status: counts.get(status, 0) for status in ("queued", "running", "done", "failed")},
                      judge_errors=sum(judge_errors.values()), judge_error_causes=judge_errors)

    app.include_router(jobs)
    return app


def _view(queue: JobQueue, job: JobRow) -> JobView:
    verdict = queue.store.verdict(job.verdict_id) if job.verdict_id is not None else None
    judge_error = verdict.message if verdict is not None and verdict.status is Status.JUDGE_ERROR else None
    return JobView(job_id=job.id, status=job.status, task_key=job.task_key, verdict_id=job.verdict_id,
                   verdict=verdict.to_dict() if verdict is not None else None, reused=job.reused, error=job.error,
                   judge_error=judge_error)
