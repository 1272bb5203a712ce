"""The SFT export's types: its options (`SFTExportConfig`), the roles it exports and the reasons a turn is
left out, the records it writes, and its summary. Pydantic only: `sft` adds what needs `datasets`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .config import model_from_toml

ExportRole = Literal["coder", "selector", "summarizer", "planner"]
EXPORT_ROLES: tuple[ExportRole, ...] = ("coder", "selector", "summarizer", "planner")

DropReason = Literal["failed", "flagged", "no_model_call", "no_reply", "no_prompt", "repeated", "unlinked",
                     "trajectory_failed", "not_admitted", "near_duplicate", "over_cap"]
REASONS: dict[DropReason, str] = {
    "failed": "the verdict was not correct, or the reply held no candidate",
    "flagged": "correct, but the judge flagged it for a person to look at",
    "no_model_call": "the kernel was not written by a model (a template search)",
    "no_reply": "the model call failed, or its reply file is gone",
    "no_prompt": "its prompt file is gone",
    "repeated": "the same request was asked again (a resumed run): the last answer is kept",
    "unlinked": "a skill selection that picked nothing usable, so no coder turn followed it",
    "trajectory_failed": "the coder turns it led to reached no success",
    "not_admitted": "the library admitted none of its skills",
    "near_duplicate": "a near-duplicate of a faster kernel kept for the same task",
    "over_cap": "over the cap per task and role (--max-per-task): the fastest were kept",
}


class SFTExportError(Exception):
    """What the user asked for cannot be exported (no such run, nothing left); printed as one line."""


class SFTExportConfig(BaseModel):
    """The options of `kernelcraft train export-sft`; each is also a flag."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key in a TOML file is an error, not a silent default

    runs: list[str] = Field(default_factory=list)  # empty: every run of the workspace
    roles: list[ExportRole] = Field(default_factory=lambda: list(EXPORT_ROLES), min_length=1)
    max_per_task: int | None = Field(None, ge=1)  # records per task and role; None: no cap
    similarity: float = Field(0.8, gt=0, le=1)  # estimated Jaccard of shingles above which two kernels are one
    shingle: int = Field(5, ge=1)  # tokens per shingle
    num_perm: int = Field(128, ge=16)  # MinHash permutations

    @field_validator("runs", "roles")
    @classmethod
    def _once_each(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))

    @classmethod
    def from_toml(cls, path: Path) -> SFTExportConfig:
        """The options in a TOML file (top-level keys of this model)."""
        return model_from_toml(cls, path, SFTExportError)


class RecordVerdict(BaseModel):
    """What made a record a success: the coder turn's verdict, the best success a selection or plan
    led to, or a summary's admission with the speedup it was admitted on."""

    status: str
    speedup: float | None


class SFTRecord(BaseModel):
    """One chat-format training example: the role's prompt, then its reply as the assistant's message."""

    messages: list[dict[str, str]]
    task: str
    role: ExportRole
    turn: int
    sample: int
    run: str
    model: str
    verdict: RecordVerdict


class RoleCounts(BaseModel):
    considered: int = 0
    kept: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)


class TaskCounts(BaseModel):
    before: int = 0  # records of the task found in the runs
    successes: int = 0  # of them, successes
    after: int = 0  # kept after the near-duplicate filter and the cap


class ExportSummary(BaseModel):
    out: str
    runs: list[str]
    config: SFTExportConfig
    considered: int
    kept: int
    dropped: dict[str, int]  # by reason
    reasons: dict[str, str]  # what each reason that occurred means
    roles: dict[str, RoleCounts]
    tasks: dict[str, TaskCounts]
