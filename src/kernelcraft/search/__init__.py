"""Search strategies that spend a budget of model calls and judge time on tasks: `refine`
(multi-turn refinement with the judge's feedback) now; idea branching, contrastive exemplars and
evolution plug in beside it through `Strategy` and `STRATEGIES`."""

from . import refine as _refine  # noqa: F401  (registers the strategy)
from .config import OptimizeConfig, SearchConfig
from .history import Exchange, estimate_tokens, trimmed_history
from .optimize import RUN_KIND, Optimizer, RunResult, TaskResult, module_name
from .strategy import (
    STRATEGIES,
    CallLog,
    RunStopped,
    SearchEvent,
    Strategy,
    TaskContext,
    TaskFailed,
    best_attempt,
    register,
)

__all__ = [
    "RUN_KIND", "STRATEGIES", "CallLog", "Exchange", "OptimizeConfig", "Optimizer", "RunResult", "RunStopped",
    "SearchConfig", "SearchEvent", "Strategy", "TaskContext", "TaskFailed", "TaskResult", "best_attempt",
    "estimate_tokens", "module_name", "register", "trimmed_history",
]
