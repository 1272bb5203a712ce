"""The options of an optimization run: one pydantic model, saved with the run (so `--resume`
continues with exactly the same settings) and filled from a run file, CLI flags and `--set` overrides."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainSerializer, PlainValidator, ValidationInfo, field_validator, model_validator

from ..agents.languages import language_for
from ..judge import JudgeConfig
from ..llm import LLMConfig
from ..skills import AdmissionPolicy
from .registry import OWN_SETTINGS

# Every count of a run has an upper bound (`le=` on its field; `--help` and docs/cli.md quote them), so a run
# always ends, whatever was typed: at the bounds a refine run asks 64 x 50 = 3,200 replies per task.
MAX_TURNS = 50
MAX_SAMPLES = 64
# The options of SearchConfig every strategy reads, besides the settings of its own it registers (registry.OWN_SETTINGS):
# with those, what `strategy_options` offers (`kernelcraft bench --arm`).
COMMON_OPTIONS = ("seed", "history_tokens", "profile")
# Each model-led strategy's length: the option counting its steps (a turn, a round, a child).
LENGTH_OPTIONS = {"refine": "turns", "branch": "turns", "contrastive": "turns", "evolve": "evolve.generations"}

# The template strategy's coarse stage, over the run's judge settings: enough to rank candidates
# and drop wrong ones, not to report a speedup (the finalists are judged again in full).
COARSE_JUDGE: dict[str, Any] = {
    "seeds": 1, "binary_seeds": 1, "second_shape": False,
    "timing": {"warmup_ms": 5.0, "min_iters": 5, "max_iters": 30, "target_ms": 30.0, "trusted_target_ms": 30.0,
               "spot_checks": 1},
}


def _judge_config(value: Any) -> JudgeConfig:
    """A JudgeConfig as it is, or from a table of options over the defaults (a run file's, a stored run's)."""
    if isinstance(value, JudgeConfig):
        return value
    if not isinstance(value, dict):
        raise ValueError("expected a table of judge options")
    return JudgeConfig().with_overrides(value)  # a wrong name, type or range is a ValueError naming the option


# The run's judge settings: one typed object from the CLI to the pool and the optimizer, saved as a table.
JudgeSettings = Annotated[JudgeConfig, PlainValidator(_judge_config), PlainSerializer(lambda c: c.to_dict(), return_type=dict)]


class BranchOptions(BaseModel):
    """`branch`: each round (a turn) the planner writes `width` ideas, each implemented `impls` times."""

    width: int = Field(3, ge=1, le=16)
    impls: int = Field(2, ge=1, le=16)
    bank: int = Field(4, ge=1, le=32)  # good earlier kernels kept to seed later rounds


class ContrastiveOptions(BaseModel):
    """`contrastive`: each round (a turn) `samples` prompts, each with two exemplars from two score buckets."""

    buckets: int = Field(4, ge=2, le=16)  # score buckets over the correct kernels so far
    temperature: float = Field(1.0, gt=0)  # of the softmax over bucket mean scores


class EvolveOptions(BaseModel):
    """`evolve`: `generations` children per task over `islands` islands."""

    islands: int = Field(2, ge=1, le=16)
    generations: int = Field(12, ge=1, le=1000)
    migrate_every: int = Field(4, ge=1, le=1000)  # generations between migrations (each island's best to the next)
    crossover: float = Field(0.3, ge=0, le=1)  # chance of a crossover when an island has two correct kernels
    archive_pick: float = Field(0.2, ge=0, le=1)  # chance a parent comes from the diversity archive
    parallel: int = Field(4, ge=1, le=64)  # children in flight at once


class TemplateOptions(BaseModel):
    """`template`: Triton GEMM templates for each task's shape, no model: the first `configs` of the
    shape's space judged with the `coarse` recipe, the `finalists` fastest judged again in full."""

    configs: int = Field(24, ge=1, le=1024)  # each judged in a thread of its own
    finalists: int = Field(3, ge=1, le=64)
    coarse: dict[str, Any] = Field(default_factory=lambda: dict(COARSE_JUDGE))  # JudgeConfig overrides

    @field_validator("coarse")
    @classmethod
    def _judge_options(cls, v: dict[str, Any]) -> dict[str, Any]:
        JudgeConfig().with_overrides(v)  # unknown options fail here, not in the middle of a run
        return v


class SkillOptions(BaseModel):
    enabled: bool = False
    snapshot: int | None = None  # the library snapshot the run uses (recorded when the run starts)
    recall: int = Field(20, ge=1, le=200)  # skills BM25 recalls for the selector to read
    k: int = Field(3, ge=1, le=20)  # skills the selector may pick per scheme
    schemes: int = Field(1, ge=1, le=16)  # selector calls per task; a no-skill scheme is always added
    learn: bool = True  # summarize trajectories that improved and verify the candidate skills
    max_new: int = Field(2, ge=1, le=8)  # candidate skills per summary
    verify_samples: int = Field(1, ge=1, le=MAX_SAMPLES)  # regenerations with and without a candidate skill
    verify_turns: int = Field(1, ge=1, le=MAX_TURNS)
    policy: AdmissionPolicy = Field(default_factory=AdmissionPolicy)


class SearchConfig(BaseModel):
    """How a strategy spends its budget on each task."""

    strategy: str = "refine"
    turns: int = Field(3, ge=1, le=MAX_TURNS)  # refine: turns per sample; branch and contrastive: rounds
    samples: int = Field(2, ge=1, le=MAX_SAMPLES)  # refine: conversations per task; contrastive: prompts per round
    language: Literal["cuda", "cpp", "triton"] | None = None  # None: the device's own (agents/templates/languages.toml)
    # The conversation shown to the model is cut to this many tokens (about 4 characters each):
    # the rules and the task always, then the most recent attempts that fit.
    history_tokens: int = Field(24000, ge=2000)
    seed: int = 0  # strategies' random choices (exemplars, parents) derive from it
    # refine and branch: "best" starts from the fastest correct kernel the workspace already has for
    # the task in the same verdict context (any run's, e.g. a template run's)
    start: Literal["scratch", "best"] = "scratch"
    # After a correct verdict, its top kernels by Nsight Compute for the feedback (CUDA, where ncu runs;
    # the roofline is given either way: it costs nothing)
    profile: bool = True
    budget_judge_calls: int | None = Field(None, ge=1)  # over the whole run, a verdict reused counting as a call
    budget_wall_s: float | None = Field(None, gt=0)  # seconds of this invocation
    # Each task's own budget (budget.TaskBudget): a task that has spent it is finished, the others go on
    task_judge_calls: int | None = Field(None, ge=1)  # evaluations per task
    task_tokens: int | None = Field(None, ge=1)  # model tokens per task (prompt and completion)
    branch: BranchOptions = Field(default_factory=BranchOptions)
    contrastive: ContrastiveOptions = Field(default_factory=ContrastiveOptions)
    evolve: EvolveOptions = Field(default_factory=EvolveOptions)
    template: TemplateOptions = Field(default_factory=TemplateOptions)
    skills: SkillOptions = Field(default_factory=SkillOptions)

    def describe(self) -> str:
        """The run's shape in a phrase, for the progress line."""
        shapes = {
            "refine": f"{self.samples} samples x {self.turns} turns",
            "branch": f"{self.turns} rounds x {self.branch.width} ideas x {self.branch.impls} implementations",
            "contrastive": f"{self.turns} rounds x {self.samples} samples",
            "evolve": f"{self.evolve.generations} children on {self.evolve.islands} islands",
            "template": f"{self.template.configs} configurations, {self.template.finalists} finalists",
        }
        snapshot = f" from snapshot {self.skills.snapshot}" if self.skills.snapshot is not None else " on"
        skills = f", skills{snapshot}" if self.skills.enabled else ""
        start = ", starting from the best kernel so far" if self.start == "best" else ""
        return f"{self.strategy} ({shapes.get(self.strategy, '')}){skills}{start}"

    def judge_calls_per_step(self) -> int:
        """The most evaluations one step of the strategy's length makes (`LENGTH_OPTIONS`), every reply judged: a
        refine turn or a contrastive round judges each sample, a branch round each implementation of each idea, an
        evolve generation one child."""
        return {"refine": self.samples, "contrastive": self.samples, "branch": self.branch.width * self.branch.impls
                }.get(self.strategy, 1)

    @property
    def needs_model(self) -> bool:
        """Whether the run asks a language model anything: every strategy but a model-free one does,
        and skills need one whatever the strategy."""
        from .registry import MODEL_FREE  # here, not at the top: the strategies register when the package is imported

        return self.strategy not in MODEL_FREE or self.skills.enabled

    @field_validator("strategy")
    @classmethod
    def _registered(cls, v: str) -> str:
        from .registry import STRATEGIES  # here, not at the top: the strategies register when the package is imported

        if v not in STRATEGIES:
            raise ValueError(f"unknown strategy {v!r}: use one of {', '.join(sorted(STRATEGIES))}")
        return v

    @field_validator("start")
    @classmethod
    def _starts(cls, v: str, info: ValidationInfo) -> str:
        from .registry import OWN_SETTINGS  # here, not at the top: the strategies register when the package is imported

        strategy = info.data.get("strategy")
        starting = [name for name, reads in OWN_SETTINGS.items() if "start" in reads]
        if v == "best" and strategy not in starting:
            raise ValueError(f"'best' is for the strategies {' and '.join(starting)}, not {strategy}")
        return v


def strategy_options(strategy: str) -> dict[str, str]:
    """The options a strategy reads, by the name a user gives each (`turns`, `width`) to its dotted path in
    SearchConfig (`turns`, `branch.width`): the settings of its own it registers (`register(..., reads=...)`), a
    table of options (`branch`) by each of its fields, and those every strategy reads. Skills are apart
    (`search.skills`)."""
    names: dict[str, str] = {}
    for own in OWN_SETTINGS.get(strategy, ()):
        table = SearchConfig.model_fields[own].annotation
        if isinstance(table, type) and issubclass(table, BaseModel):
            names.update({name: f"{own}.{name}" for name in table.model_fields})
        else:
            names[own] = own
    return names | {name: name for name in COMMON_OPTIONS}


class OptimizeConfig(BaseModel):
    """Everything an `optimize` run needs to start or resume."""

    target: str  # a task file, a suite directory, or a user's module "path.py:Class"
    inputs: str | None = None  # "path.py:fn" for a user's module (or for --from-model)
    init_inputs: str | None = None
    # The hgemm suite's shapes: a stratified sample of the grid, or a list "MxNxK". A --from-model
    # capture is saved as its list, so a resumed run has the same tasks even if the model changed.
    sample: int | None = None
    shapes: list[str] | None = None
    from_model: str | None = None  # "path.py:Class" whose matmul shapes `shapes` holds
    sets: list[str] = Field(default_factory=list)  # --set NAME=VALUE size overrides
    device: str = "cuda"
    workers: int | None = None  # concurrent judge evaluations (default: the pool's)
    out: str | None = None  # where the best kernels are written (default: the run's folder)
    judge: JudgeSettings = Field(default_factory=JudgeConfig)
    llm: LLMConfig
    search: SearchConfig = Field(default_factory=SearchConfig)

    @model_validator(mode="after")
    def _language(self) -> "OptimizeConfig":
        """The kernel language, checked against the device; the device's own where none is named."""
        self.search.language = language_for(self.device, self.search.language)
        return self
