"""What the judge service and its clients say to each other (JSON, under /v1)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field, model_validator

API_PREFIX = "/v1"
JobStatus = Literal["queued", "running", "done", "failed"]


class SubmitRequest(BaseModel):
    """One candidate for one task. The task is either a spec (a bundled example's name, "hgemm/MxNxK", or a
    .py file under one of the service's task roots, by a path relative to the root or absolute) or a reference
    module's source with a name for it."""

    source: str = Field(min_length=1, description="The candidate's Python source (defines ModelNew).")
    task: Optional[str] = Field(None, max_length=4096, description="A task spec: a bundled task's name or a path "
                                                                   "under a --task-root of the service.")
    task_source: Optional[str] = Field(None, description="A reference module in KernelBench format.")
    task_name: Optional[str] = Field(None, description="The key of a task given by its source.")
    sizes: dict[str, Any] = Field(default_factory=dict, description="Module-constant overrides, checked as --set's "
                                                                    "(tasks.check_sizes).")
    client_key: Optional[str] = Field(None, min_length=1, max_length=200,
                                      description="Idempotency key: submitting it again returns the same job.")
    fresh: bool = Field(False, description="Judge again even if an equal candidate already has a verdict "
                                           "(e.g. to re-measure an outsized win).")

    @model_validator(mode="after")
    def _one_task(self) -> "SubmitRequest":
        if (self.task is None) == (self.task_source is None):
            raise ValueError("give exactly one of task (a task spec) and task_source (a reference module's source)")
        if self.task_source is not None and not self.task_name:
            raise ValueError("task_source needs a task_name")
        if self.task is not None and self.task_name is not None:
            raise ValueError("task_name goes with task_source, not with task")
        return self


class SubmitResponse(BaseModel):
    job_id: int
    created: bool  # false when the client_key named an existing job


class JobView(BaseModel):
    """A job as clients see it; `verdict` is the judge's Verdict as JSON (Verdict.from_dict rebuilds it)."""

    job_id: int
    status: JobStatus
    task_key: str
    verdict_id: Optional[int] = None
    verdict: Optional[dict[str, Any]] = None
    reused: bool = False  # the verdict of an earlier, equal candidate (same normalized source and judge context)
    error: Optional[str] = None
    # The verdict's message when its status is judge_error: the judge failed on its side, not the candidate. Such a
    # sample has no reward: a trainer skips it (rewards.coder_reward rejects it).
    judge_error: Optional[str] = None


class Health(BaseModel):
    device: str
    device_name: str
    workers: int
    queued: int
    running: int
    done: int
    failed: int
    judge_errors: int = 0  # done jobs whose verdict is a judge_error (counted in done too)
    judge_error_causes: dict[str, int] = Field(default_factory=dict)  # their verdicts' messages
