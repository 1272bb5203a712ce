"""The options of an optimization run: one pydantic model, saved with the run (so `--resume`
continues with exactly the same settings) and filled from CLI flags."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from ..llm import LLMConfig


class SearchConfig(BaseModel):
    """How a strategy spends its budget on each task."""

    strategy: str = "refine"
    turns: int = Field(3, ge=1)  # refinement turns per sample
    samples: int = Field(2, ge=1)  # independent samples (conversations) per task
    language: Literal["cuda", "triton"] = "cuda"
    # The conversation shown to the model is cut to this many tokens (about 4 characters each):
    # the rules and the task always, then the most recent attempts that fit.
    history_tokens: int = Field(24000, ge=2000)

    @field_validator("strategy")
    @classmethod
    def _registered(cls, v: str) -> str:
        from .strategy import STRATEGIES  # here, not at the top: strategies import this module

        if v not in STRATEGIES:
            raise ValueError(f"unknown strategy {v!r}: use one of {', '.join(sorted(STRATEGIES))}")
        return v


class OptimizeConfig(BaseModel):
    """Everything an `optimize` run needs to start or resume."""

    target: str  # a task file, a suite directory, or a user's module "path.py:Class"
    inputs: str | None = None  # "path.py:fn" for a user's module
    init_inputs: str | None = None
    sets: list[str] = Field(default_factory=list)  # --set NAME=VALUE size overrides
    device: str = "cuda"
    workers: int | None = None  # concurrent judge evaluations (default: the pool's)
    out: str | None = None  # where the best kernels are written (default: the run's folder)
    judge: dict[str, Any] = Field(default_factory=dict)  # JudgeConfig overrides
    llm: LLMConfig
    search: SearchConfig = Field(default_factory=SearchConfig)
