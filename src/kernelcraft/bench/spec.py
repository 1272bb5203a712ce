"""What a bench is, saved in its workspace so that the whole bench lives there: its settings (`bench.json`: the tasks
with their sources, the arms, the budget per task, the model, device and judge settings) and its state
(`bench-state.json`: the device it runs on, each arm's wall time, why a baseline is missing). Nothing in them is an
absolute path a copy of the workspace elsewhere would miss: a batch directory inside the workspace is saved relative
to it, and the tasks are saved whole, so a bench resumes from a copy moved to another machine and path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ..llm import LLMConfig
from ..search import OptimizeConfig
from ..settings import one_line
from ..tasks import Task
from .arms import Arm

SPEC_FILE = "bench.json"
STATE_FILE = "bench-state.json"
ARMS_DIR = "arms"  # one workspace per arm: its own runs, verdicts, model replies and skill library
RESULTS_DIR = "results"
SPEC_VERSION = 1


class BenchError(ValueError):
    """A bench that cannot be started or resumed as asked; one line for the user."""


class BenchSpec(BaseModel):
    """A bench's settings: `base` holds what every arm shares (device, judge, model, the search defaults a run file
    gave); each arm's run is `base` with the arm's search (`Arm.search`) and the budget per task."""

    version: int = SPEC_VERSION
    target: str  # as the user gave it; `tasks` is what runs
    base: OptimizeConfig
    arms: list[Arm]
    judge_calls: int = Field(ge=1)  # evaluations per task, the same for every arm
    tokens: int | None = Field(None, ge=1)  # model tokens per task, the same for every arm
    tasks: list[dict[str, Any]]  # Task.to_dict() with the source

    @classmethod
    def of(cls, target: str, base: OptimizeConfig, arms: list[Arm], judge_calls: int, tokens: int | None,
           tasks: list[Task], workspace: Path) -> "BenchSpec":
        """A new bench's settings, each arm's checked whole (ArmError), the model's directory saved relative to the
        workspace when it lies inside it."""
        for arm in arms:
            arm.search(base.search, judge_calls, tokens)
        llm = base.llm.model_copy(update={"path": _relative(base.llm.path, workspace)})
        return cls(target=target, base=base.model_copy(update={"llm": llm}), arms=arms, judge_calls=judge_calls,
                   tokens=tokens, tasks=[{**t.to_dict(), "source": t.source} for t in tasks])

    def task_list(self) -> list[Task]:
        return [Task.from_dict(d) for d in self.tasks]

    def arm_config(self, arm: Arm) -> OptimizeConfig:
        """The settings of `arm`'s run."""
        return self.base.model_copy(update={"search": arm.search(self.base.search, self.judge_calls, self.tokens)})

    def llm(self, workspace: Path) -> LLMConfig:
        """The model's settings, a relative directory (batch, replay) found in `workspace` wherever it now is."""
        path = self.base.llm.path
        if path is None or Path(path).is_absolute():
            return self.base.llm
        return self.base.llm.model_copy(update={"path": str(workspace / path)})

    def differs(self, other: "BenchSpec") -> str | None:
        """What of `other` is not this bench's (None: the same bench, wherever its target now is)."""
        mine, theirs = self._compared(), other._compared()
        return next((key for key in mine if mine[key] != theirs[key]), None)

    def _compared(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"target"})
        data["base"].pop("target")
        data["arms"] = [{k: v for k, v in arm.items() if k != "text"} for arm in data["arms"]]
        data["tasks"] = [(t["key"], t["source"]) for t in data["tasks"]]
        return data


class BenchState(BaseModel):
    """What a bench's invocations leave for the next: the device its verdicts are measured on, each arm's wall time,
    and why a baseline could not be timed on a task."""

    device_name: str = ""
    invocations: int = 0
    arm_wall_s: dict[str, float] = Field(default_factory=dict)  # every invocation's time in each arm, summed
    baseline_notes: dict[str, str] = Field(default_factory=dict)  # task key -> the baseline timing's warning
    restarted_arms: list[str] = Field(default_factory=list)  # arms started over (`restart_arm`), in order


def save_spec(workspace: Path, spec: BenchSpec) -> None:
    _write(workspace / SPEC_FILE, spec.model_dump_json(indent=1))


def load_spec(workspace: Path) -> BenchSpec:
    """The bench saved in `workspace`; BenchError when there is none or it cannot be read."""
    path = workspace / SPEC_FILE
    if not path.is_file():
        raise BenchError(f"{workspace}: no bench here (no {SPEC_FILE}): give -w the bench's workspace")
    try:
        return BenchSpec.model_validate_json(path.read_text())
    except ValidationError as e:
        raise BenchError(f"{path}: not a bench this kernelcraft can read ({one_line(e)})") from None


def load_state(workspace: Path) -> BenchState:
    path = workspace / STATE_FILE
    return BenchState.model_validate_json(path.read_text()) if path.is_file() else BenchState()


def save_state(workspace: Path, state: BenchState) -> None:
    _write(workspace / STATE_FILE, state.model_dump_json(indent=1))


def _write(path: Path, text: str) -> None:
    """Written whole or not at all: a bench stopped while saving keeps its last state."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _relative(path: str | None, workspace: Path) -> str | None:
    """`path` relative to `workspace` when it lies inside it (so a moved workspace still finds it), else absolute."""
    if path is None:
        return None
    resolved, home = Path(path).resolve(), workspace.resolve()
    return str(resolved.relative_to(home)) if resolved.is_relative_to(home) else str(resolved)


__all__ = ["ARMS_DIR", "RESULTS_DIR", "BenchError", "BenchSpec", "BenchState", "load_spec", "load_state", "save_spec",
           "save_state"]
