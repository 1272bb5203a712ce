"""Search strategies that spend a budget of model calls and judge time on tasks: `refine`
(multi-turn refinement with the judge's feedback), `branch` (natural-language ideas branching into
implementations), `contrastive` (two exemplars from two score buckets) and `evolve` (islands,
mutation and crossover, a diversity archive), all behind `Strategy` and `STRATEGIES`; skills chosen
for each task and learned from it."""

from . import branch as _branch  # noqa: F401  (each module registers its strategy)
from . import contrastive as _contrastive  # noqa: F401
from . import evolve as _evolve  # noqa: F401
from . import refine as _refine  # noqa: F401
from . import template as _template  # noqa: F401
from .budget import JudgeBudget, TaskBudget
from .config import (LENGTH_OPTIONS, BranchOptions, ContrastiveOptions, EvolveOptions, OptimizeConfig, SearchConfig,
                     SkillOptions, TemplateOptions, strategy_options)
from .errors import RunStopped, TaskBudgetSpent, TaskFailed
from .history import Exchange, estimate_tokens, trimmed_history
from .optimize import RUN_KIND, Optimizer, RunResult, TaskResult, module_name, run_optimize, tasks_of
from .skill_use import VERIFY_BASE, SkillLearner, Verification, improvement, is_verification, skill_schemes, trajectories
from .registry import MODEL_FREE, STRATEGIES, Strategy, others_settings, register, unsuited
from .repeats import REPEAT_LIMIT, repeat_note
from .strategy import REPEATED, SCREENING, CallLog, Outcome, SearchEvent, SkillScheme, TaskContext, best_attempt, ranked_attempts

__all__ = [
    "LENGTH_OPTIONS", "MODEL_FREE", "REPEATED", "REPEAT_LIMIT", "RUN_KIND", "SCREENING", "STRATEGIES", "VERIFY_BASE", "BranchOptions",
    "CallLog", "ContrastiveOptions",
    "EvolveOptions", "Exchange", "JudgeBudget", "OptimizeConfig", "Optimizer", "Outcome", "RunResult", "RunStopped",
    "SearchConfig", "SearchEvent", "SkillLearner", "SkillOptions", "SkillScheme", "Strategy", "TaskBudget", "TaskBudgetSpent", "TaskContext", "TaskFailed",
    "TaskResult", "TemplateOptions", "run_optimize", "tasks_of", "Verification", "best_attempt", "ranked_attempts", "estimate_tokens", "improvement", "is_verification",
    "module_name", "others_settings", "register", "repeat_note", "skill_schemes", "strategy_options", "trajectories", "trimmed_history",
    "unsuited",
]
