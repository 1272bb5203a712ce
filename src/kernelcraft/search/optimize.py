"""An optimization run: every task of a target through one strategy, tasks side by side, every
attempt in the store, the best kernel of each task written as a file a user can import. A run
stopped by its budget, a batch waiting for replies, a judge failing on its own side, or an
interrupt is continued by `resume`, which skips finished tasks and finished turns.

A line of work that parks (a batch reply not in yet, a judge error) stops alone; the run stops
once every task has finished or parked, and only then does the batch backend write the requests
it held, all in one round."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from ..agents import Coder, Planner, SkillSelector, SkillSummarizer
from ..judge import DeviceDescription, Executor, KernelProfiler, open_executor
from ..judge.reuse import verdict_context
from ..llm import LLMClient, Spend, make_client
from ..skills import Skill, SkillLibrary
from ..store import AttemptRow, Store
from ..tasks import Task, resolve_target
from .budget import JudgeBudget, TaskBudget
from .config import OptimizeConfig
from .errors import Parked, RunStopped, TaskBudgetSpent, TaskFailed
from .parked import ParkedWork
from .skill_use import SkillLearner, Verification, skill_schemes
from .registry import MODEL_FREE, STRATEGIES
from .strategy import CallLog, SearchEvent, TaskContext, best_attempt

RUN_KIND = "optimize"


@dataclass(frozen=True)
class TaskResult:
    task: Task
    best: AttemptRow | None  # None: no correct candidate
    best_file: Path | None
    attempts: int
    finished: bool
    error: str | None = None  # the task itself could not be run


@dataclass(frozen=True)
class RunResult:
    run_id: str
    tasks: list[TaskResult]
    stopped: str | None  # why the run stopped before finishing every task, or None
    spend: Spend
    out_dir: Path
    spent: tuple[str, ...] = ()  # the run-wide budgets (config paths) a resume must raise to go on


def tasks_of(config: OptimizeConfig) -> list[Task]:
    """The tasks of a run's target, at its sizes."""
    return resolve_target(config.target, device=config.device, sets=config.sets, inputs=config.inputs,
                          init_inputs=config.init_inputs, sample=config.sample, shapes=config.shapes, from_model=config.from_model)


def run_optimize(config: OptimizeConfig, workspace: str | Path, resume: str | None = None,
                 emit: Callable[[SearchEvent], None] = lambda e: None) -> RunResult:
    """A whole optimize run from Python, as `kernelcraft optimize` runs it without its display: the target's tasks,
    the model's client (replies cached in the workspace), a judge pool over the device's GPUs, the search; or, with
    `resume`, that stopped run continued. Raises EndpointError when the endpoint cannot be used at all."""
    tasks = tasks_of(config)
    with Store(workspace) as store, open_executor(config.device, cache_dir=store.cache_dir, config=config.judge,
                                                  workers=config.workers) as pool:
        client = make_client(config.llm, cache_dir=store.workspace / "llm-cache")
        client.check()
        optimizer = Optimizer(config, store, client, pool, pool.description, emit)
        return optimizer.run(resume or optimizer.start(tasks), tasks)


def module_name(task: Task) -> str:
    """A file name for a task's best kernel that is also an importable module name."""
    return re.sub(r"\W", "_", task.key).strip("_") or "task"


class Optimizer:
    def __init__(self, config: OptimizeConfig, store: Store, client: LLMClient, pool: Executor,
                 device: DeviceDescription, emit: Callable[[SearchEvent], None] = lambda e: None,
                 cache_dir: Path | None = None) -> None:
        """`cache_dir`: the build cache `pool` judges with, where the profiler finds the builds (default the store's)."""
        self.config = config
        self.cache_dir = cache_dir or store.cache_dir
        self.store = store
        self.client = client
        self.pool = pool
        self.device = device
        self.emit = emit
        self.judge_config = config.judge
        self.stop = threading.Event()
        self.abort = threading.Event()
        self.parked = ParkedWork()  # what this invocation's parked work waits on
        self.library = SkillLibrary(store) if config.search.skills.enabled else None
        self.profiler, self.no_profile = self._profiler()

    def _profiler(self) -> tuple[KernelProfiler | None, str]:
        """What profiles correct candidates' kernels for the feedback (on the first device, with the store's build
        cache), or None and why none does: turned off, a strategy whose attempts no model reads, or no Nsight
        Compute here."""
        if not self.config.search.profile:
            return None, "turned off"
        if self.config.search.strategy in MODEL_FREE:
            return None, f"the {self.config.search.strategy} strategy tells no model"
        profiler = KernelProfiler(self.config.device, cache_dir=self.cache_dir, config=self.judge_config)
        why = profiler.ncu_unavailable()
        return (None, why) if why is not None else (profiler, "")

    def start(self, tasks: list[Task], kind: str = RUN_KIND) -> str:
        """A new run in the store, with its configuration (what `resume` reads back), its tasks, and the
        skill snapshot it uses."""
        if self.library is not None and self.config.search.skills.snapshot is None:
            skills = self.config.search.skills.model_copy(update={"snapshot": self.library.current})
            self.config = self.config.model_copy(update={"search": self.config.search.model_copy(update={"skills": skills})})
        run_id = self.store.start_run(kind, self.config.model_dump(mode="json"))
        self.store.add_run_tasks(run_id, tasks)
        return run_id

    def out_dir(self, run_id: str) -> Path:
        return Path(self.config.out) if self.config.out else self.store.workspace / "runs" / run_id / "best"

    def run(self, run_id: str, tasks: list[Task]) -> RunResult:
        """Run (or continue) `run_id` over `tasks`. On KeyboardInterrupt nothing more is recorded
        and the interrupt propagates; every attempt recorded before it stays."""
        coder, calls, budget = self._attach(run_id)
        finished = {r.task_key for r in self.store.run_tasks(run_id) if r.finished_at is not None}
        errors: dict[str, str] = {}
        stopped: str | None = None
        executor = ThreadPoolExecutor(max_workers=self.client.config.concurrency, thread_name_prefix="kc-task")
        try:
            futures: dict[Future[None], Task] = {
                executor.submit(self._task, self.context(t, run_id, coder, calls, budget)): t
                for t in tasks if t.key not in finished}
            wait(futures)
        except BaseException:
            self.abort.set()
            self.stop.set()
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        executor.shutdown()
        for future, task in futures.items():
            e = future.exception()
            if isinstance(e, Parked):  # what it waits on is in self.parked
                continue
            if isinstance(e, RunStopped):
                stopped = stopped or str(e)
            elif isinstance(e, TaskFailed):
                errors[task.key] = str(e)
            elif e is not None:
                raise e
        stopped = self._stop_reason(stopped)
        if stopped is None:
            self.store.finish_run(run_id)
        done = {r.task_key for r in self.store.run_tasks(run_id) if r.finished_at is not None}
        results = [self._result(run_id, t, t.key in done, errors.get(t.key)) for t in tasks]
        return RunResult(run_id, results, stopped, self.client.spend, self.out_dir(run_id),
                         self._spent(budget) if stopped else ())

    def _spent(self, budget: JudgeBudget) -> tuple[str, ...]:
        """The budgets that cover the whole run and are spent (the wall-time budget is each invocation's own)."""
        c, s = self.client.config, self.client.spend
        spent = {"llm.budget_tokens": c.budget_tokens is not None and s.tokens >= c.budget_tokens,
                 "llm.budget_usd": c.budget_usd is not None and s.cost_usd >= c.budget_usd,
                 "search.budget_judge_calls": budget.max_judge_calls is not None and budget.used >= budget.max_judge_calls}
        return tuple(path for path, out in spent.items() if out)

    def _stop_reason(self, stopped: str | None) -> str | None:
        """Why the run stops: `stopped` (a budget, an endpoint), and what its parked work waits on, once
        the batch backend has written the requests it held."""
        parked = self.parked.summary(self.client.flush())
        return "; ".join(reason for reason in (stopped, parked) if reason) or None

    def _attach(self, run_id: str) -> tuple[Coder, CallLog, JudgeBudget]:
        """Point the model client at `run_id`'s records and budgets; returns the coder, the call log and
        the judge budget, in the order `context` takes them."""
        calls = CallLog(self.store, run_id)
        self.client.on_call = calls
        self._count_earlier_spend(run_id)
        search = self.config.search
        budget = JudgeBudget(search.budget_judge_calls, search.budget_wall_s, self.store.judge_calls(run_id))
        return Coder(self.client, search.language, self.device), calls, budget

    def _count_earlier_spend(self, run_id: str) -> None:
        """Budgets cover the whole run: what earlier invocations of it spent counts too."""
        calls, prompt, completion, cost = self.store.run_spend(run_id)
        s = self.client.spend
        s.calls, s.prompt_tokens, s.completion_tokens, s.cost_usd = calls, prompt, completion, cost

    def context(self, task: Task, run_id: str, coder: Coder, calls: CallLog, budget: JudgeBudget) -> TaskContext:
        """What a strategy (or a skill verification) is given for one task, with the task's own budget as far as
        the store says it is spent."""
        search = self.config.search
        task_budget = TaskBudget(search.task_judge_calls, search.task_tokens,
                                 self.store.judge_calls(run_id, task.key, judge_errors=False),
                                 lambda: sum(self.store.run_spend(run_id, task.key)[1:3]))
        return TaskContext(task=task, run_id=run_id, config=self.config.search, coder=coder,
                           planner=Planner(self.client, self.config.search.language, self.device), store=self.store,
                           pool=self.pool, calls=calls, prior=self.store.attempts(run_id, task.key), emit=self.emit,
                           stop=self.stop, abort=self.abort, budget=budget,
                           judge_config=self.judge_config, device=self.device, parked=self.parked, profiler=self.profiler,
                           context=verdict_context(task, self.judge_config, self.device.name), task_budget=task_budget)

    def _skills(self) -> list[Skill]:
        assert self.library is not None
        return self.library.skills(self.config.search.skills.snapshot)

    def _task(self, ctx: TaskContext) -> None:
        """One task: its skill schemes, the strategy, then learning from it; a task whose own budget runs out on the
        way is finished there (learning included: the budget is everything the task spends)."""
        try:
            if self.library is not None:
                ctx.schemes = skill_schemes(ctx, self._skills(), SkillSelector(self.client))
            STRATEGIES[self.config.search.strategy]().run(ctx)
            if self.library is not None and self.config.search.skills.learn:
                SkillLearner(self.library, SkillSummarizer(self.client)).learn(ctx)
        except TaskBudgetSpent:
            pass
        except TaskFailed as e:
            self.store.finish_run_task(ctx.run_id, ctx.task.key)
            ctx.emit(SearchEvent("task_done", ctx.task.key, message=str(e)))
            raise
        self.store.finish_run_task(ctx.run_id, ctx.task.key)
        result = self._result(ctx.run_id, ctx.task, True, None)
        ctx.emit(SearchEvent("task_done", ctx.task.key, speedup=result.best.speedup if result.best else None))

    def verify_skill(self, run_id: str, task: Task, skill: Skill) -> Verification:
        """Admission by verification for one skill on one task (`kernelcraft skills verify`): the run
        regenerates the task's kernel with and without it and admits it if the judge's numbers say so."""
        assert self.library is not None, "skills must be enabled to verify one"
        ctx = self.context(task, run_id, *self._attach(run_id))
        search = self.config.search
        cid = self.store.record_skill_candidate(skill.model_dump(mode="json"), "pending", "awaiting verification",
                                                run_id=run_id, task_key=task.key)
        learner = SkillLearner(self.library, SkillSummarizer(self.client))
        try:
            result = learner.verify(ctx, skill, 0, cid, search.skills.verify_samples, search.skills.verify_turns)
        except Parked:
            raise RunStopped(self._stop_reason(None) or "the verification waits") from None
        self.store.finish_run(run_id)
        return result

    def _result(self, run_id: str, task: Task, finished: bool, error: str | None) -> TaskResult:
        attempts = self.store.attempts(run_id, task.key)
        best = best_attempt(attempts)
        path = self._write_best(run_id, task, best) if best is not None else None
        return TaskResult(task, best, path, len(attempts), finished, error)

    def _write_best(self, run_id: str, task: Task, best: AttemptRow) -> Path:
        assert best.verdict_id is not None  # a correct attempt always has its verdict
        verdict = self.store.verdict(best.verdict_id)
        band = f" (noise band {verdict.speedup_band[0]:.2f}-{verdict.speedup_band[1]:.2f}x)" if verdict.speedup_band else ""
        header = (f"# kernelcraft: the best kernel found for {task.key}: {best.speedup:.2f}x{band} against PyTorch eager\n"
                  f"# on {verdict.env.get('device_name', self.device.name)}; verdict {best.verdict_id} of run {run_id} "
                  f"(sample {best.sample + 1}, turn {best.turn + 1}). Use: from {module_name(task)} import ModelNew\n")
        path = self.out_dir(run_id) / f"{module_name(task)}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + self.store.candidate_source(best.verdict_id))
        return path
