"""The interface every search strategy implements, and what a strategy is given for one task.

A strategy decides which prompts to send and which candidates to judge; `TaskContext` does the
rest the same way for all of them: judging (each distinct source once per verdict context, through
judge.reuse.VerdictReuse, whose rules the judge service and the RL environment follow too), recording every
attempt in the store, telling the run's progress display, and stopping when the run must stop.
Every strategy registers in `STRATEGIES` (registry.py); a resumed run replays the attempts already recorded
(`prior_attempt`) and the decisions already saved (`saved`) instead of asking again.

A line of work parks (raises Parked) when its model reply is not in yet (a batch) or when the judge
failed on its own side (a judge_error verdict, never shown to the model nor recorded as an
attempt); the rest of the run goes on. A step parked by a judge error is judged again on resume
from its stored source (`held`), with no new model call."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, TypeVar

from ..agents import Coder, KernelExample, ParseFailure, Planner, Proposal, Truncated
from ..judge import DeviceDescription, Executor, Job, JudgeConfig, KernelProfiler, Result, Status, TaskRules, Verdict
from ..judge.reuse import Judged, VerdictReuse, verdict_context
from ..llm import BatchPending, CallFailed, CallRecord, LLMError, Message
from ..skills import Skill
from ..store import AttemptRow, Store
from ..tasks import Task
from .budget import JudgeBudget, TaskBudget
from .config import SearchConfig
from .errors import RUN_STOPPING_ERRORS, Parked, RunStopped, TaskFailed
from .parked import ParkedWork
from .repeats import repeat_note

PARSE_FAILED = "parse_failed"
TRUNCATED = "truncated"  # the reply was cut at the token limit before its code was complete
LLM_ERROR = "llm_error"  # the endpoint refused the request (a call that got no reply is no attempt: CallFailed)
STOPPING = "the run is stopping"  # a line of work that would ask the model after the run began to stop
REPEATED = "repeated/"  # a task's saved state: `repeated/SAMPLE` holds the turns a sample took before it ended repeating
T = TypeVar("T")


@dataclass(frozen=True)
class SearchEvent:
    """Progress, as a strategy reports it: an attempt judged, or a task finished."""

    kind: str  # "attempt", "sample_stopped" (it gave one answer again and again: `message` says so) or "task_done"
    task_key: str
    sample: int = -1
    turn: int = -1
    status: str = ""
    speedup: float | None = None
    message: str = ""


class CallLog:
    """Records every model call in the store and remembers its row id by request key, so an
    attempt can point at the call that produced it."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, record: CallRecord) -> None:
        call_id = self.store.record_llm_call(record, self.run_id)
        if record.reply is not None:
            with self._lock:
                self._ids[record.request.key()] = call_id

    def id_for(self, proposal: Proposal) -> int | None:
        with self._lock:
            return self._ids.get(proposal.request.key())


@dataclass(frozen=True)
class SkillScheme:
    """The skills one group of a task's samples is shown; scheme 0 is always the one without skills."""

    index: int
    skills: tuple[Skill, ...] = ()
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What became of one attempt, as a strategy needs it to choose the next."""

    status: str
    speedup: float | None  # effective speedup when correct
    feedback: str
    source: str | None  # None when the reply held no candidate
    verdict_id: int | None = None

    @property
    def correct(self) -> bool:
        return self.status == "correct" and self.speedup is not None

    def example(self) -> KernelExample:
        assert self.source is not None
        return KernelExample(self.source, self.speedup, self.feedback)


@dataclass(frozen=True)
class HeldStep:
    """A step whose evaluation failed on the judge's side before a stop: the source to judge again,
    and the model call that wrote it (None for a source a strategy wrote itself)."""

    source: str
    llm_call_id: int | None
    reply: str | None


def _held_key(sample: int, turn: int) -> str:
    return f"held/{sample}/{turn}"


@dataclass
class TaskContext:
    task: Task
    run_id: str
    config: SearchConfig
    coder: Coder
    planner: Planner
    store: Store
    pool: Executor
    calls: CallLog
    prior: list[AttemptRow]  # attempts a stopped run already recorded for this task
    emit: Callable[[SearchEvent], None]
    stop: threading.Event  # no new model calls; evaluations under way are still recorded
    abort: threading.Event  # interrupted: record nothing more (a killed worker's verdict is no verdict)
    budget: JudgeBudget
    judge_config: JudgeConfig  # what every evaluation of this context is judged with
    device: DeviceDescription
    context: str  # the verdict context (task, judge settings, device): equal sources in it are judged once
    schemes: list[SkillScheme] = field(default_factory=lambda: [SkillScheme(0)])
    own_run_only: bool = False  # reuse only this run's verdicts (see measured_here)
    parked: ParkedWork = field(default_factory=ParkedWork)  # the run's tally of parked work, shared by its tasks
    profiler: KernelProfiler | None = None  # correct candidates' top kernels for the feedback (None: the roofline alone)
    task_budget: TaskBudget = field(default_factory=lambda: TaskBudget(None, None))  # this task's own (shared by copies)
    _reuse: VerdictReuse = field(init=False)  # each copy (`rejudged`, `measured_here`) has its own evaluations in flight

    def __post_init__(self) -> None:
        self._reuse = VerdictReuse(self.store, origin="search", run_id=self.run_id)

    # -- prompts -------------------------------------------------------------------------------
    @property
    def rules(self) -> TaskRules:
        """What the judge, as this context configures it, asks of the task's candidates: what the prompts state."""
        return TaskRules.of(self.judge_config, self.task, self.device.kind)

    def scheme(self, sample: int) -> SkillScheme:
        """Samples take the schemes in turn, so the no-skill scheme is always tried."""
        return self.schemes[sample % len(self.schemes)]

    def opening(self, sample: int) -> list[Message]:
        return self.coder.opening(self.task, self.rules, self.scheme(sample).skills)

    def meta(self, sample: int, **values: Any) -> dict[str, Any]:
        """An attempt's note: the strategy's values, and the skill scheme when skills are on."""
        return {**values, "scheme": self.scheme(sample).index} if len(self.schemes) > 1 else dict(values)

    def start_kernel(self) -> Outcome | None:
        """With `start = "best"`: the fastest correct kernel the workspace has for this task in this verdict
        context (any run's), or None. Chosen once and saved, so a resumed run starts from the same one."""
        if self.config.start != "best":
            return None
        chosen = self.saved("start")
        if chosen is None:
            best = self.store.correct_kernels(self.context, limit=1)
            chosen = {"verdict_id": best[0][0] if best else None}
            self.save("start", chosen)
        vid = chosen["verdict_id"]
        if vid is None:
            return None
        verdict = self.store.verdict(vid)
        return Outcome(verdict.status.value, verdict.effective_speedup, self.feedback(verdict, vid),
                       self.store.candidate_source(vid), vid)

    # -- model calls ---------------------------------------------------------------------------
    def guarded(self, call: Callable[[], T]) -> T:
        """Run a model call; a run-stopping model error (or a spent wall-time budget) sets `stop` and
        raises RunStopped; a batch reply not in yet raises Parked (the rest of the run goes on); a call
        that got no reply raises Parked and sets `stop` (the endpoint is failing: asking on wastes retries).
        A task whose own budget is spent asks nothing: TaskBudgetSpent."""
        if self.stop.is_set():
            raise Parked(STOPPING)
        self.task_budget.check()
        try:
            self.budget.check_time()
            return call()
        except BatchPending as e:
            self.parked.reply()
            raise Parked(str(e)) from None
        except CallFailed as e:
            self.parked.call_failed(str(e))
            self.stop.set()
            raise Parked(str(e)) from None
        except RUN_STOPPING_ERRORS as e:
            self.stop.set()
            raise RunStopped(str(e)) from None
        except RunStopped:
            self.stop.set()
            raise

    def ask(self, messages: list[Message], sample: int) -> Proposal:
        """The coder's answer; a run-stopping model error sets `stop` and raises RunStopped. The ask holds one of
        the task's judge calls for the candidate (TaskBudget.hold_for_ask) until `record` judges it or finds none,
        so a task never asks for replies it could not judge."""
        ready = self.coder.ready(messages, task=self.task.key, sample=sample)
        self.task_budget.hold_for_ask(reply_ready=ready)
        try:
            return self.guarded(lambda: self.coder.propose(messages, task=self.task.key, sample=sample))
        except Parked:
            self.task_budget.park_ask()
            raise
        except BaseException:
            self.task_budget.end_ask()
            raise

    # -- judging -------------------------------------------------------------------------------
    def rejudged(self, overrides: dict[str, Any]) -> "TaskContext":
        """This task judged with the run's judge settings changed by `overrides` (e.g. a short timing recipe
        for screening): a verdict context of its own, so verdicts are reused only among equal settings."""
        config = self.judge_config.with_overrides(overrides)
        return dataclasses.replace(self, judge_config=config, context=verdict_context(self.task, config, self.device.name))

    def measured_here(self) -> "TaskContext":
        """This task judged with verdicts of this run only (a resumed run still replays its own): for a
        result picked because an earlier run measured it fastest, whose earlier verdict would report
        the luckiest of several measurements (the winner's curse) rather than a fresh one."""
        return dataclasses.replace(self, own_run_only=True)

    def judge(self, source: str) -> tuple[Verdict, int]:
        """The verdict (and its stored id) for `source` on this task. A source equal to one already
        judged in this context, up to comments and whitespace, is not judged again (judge.reuse's rules), but it
        counts against the run's and the task's judge budgets all the same: a model that repeats itself spends a
        budget as one that writes new kernels, so a judge budget always ends a run.
        Raises TaskFailed when the task's reference fails, RunStopped when the judge budget is spent,
        TaskBudgetSpent when the task's own judge calls are."""
        self.task_budget.claim_judge_call()
        try:
            self.budget.claim_judge_call()
        except RunStopped:
            self.task_budget.release()
            self.stop.set()
            raise
        judged = self._reuse.judge(self.task, source, self.context, lambda: self._evaluate(source),
                                   only_run=self.run_id if self.own_run_only else None,
                                   then=lambda j: self._profile(j, source))
        return judged.verdict, judged.verdict_id

    def _evaluate(self, source: str) -> Verdict:
        result: Result = self.pool.submit(Job(self.task, source, tag="search", config=self.judge_config)).result()
        self._check_abort()
        if result.verdict is None:
            raise TaskFailed(result.error or "the task failed to run")
        if result.verdict.status is Status.JUDGE_ERROR:  # the judge's own failure spends none of the task's budget
            self.task_budget.release()
        return result.verdict

    def _profile(self, judged: Judged, source: str) -> None:
        """A correct candidate's top kernels, once per verdict (a reused verdict keeps its profile), after the
        verdict so none is slowed; while ncu runs here (after a refusal, the roofline alone)."""
        if not judged.verdict.correct or self.profiler is None or self.profiler.ncu_unavailable() is not None:
            return
        if self.store.kernel_profile(judged.verdict_id) is None:
            self.store.record_kernel_profile(judged.verdict_id, self.profiler.profile(self.task, source))
            self._check_abort()

    def feedback(self, verdict: Verdict, vid: int) -> str:
        """What the model is told of a verdict: the judge's findings, the roofline and any kernel profile."""
        return self.coder.feedback(verdict, self.store.kernel_profile(vid)).content

    def _check_abort(self) -> None:
        if self.abort.is_set():
            raise RunStopped("interrupted")

    # -- recording -----------------------------------------------------------------------------
    def record(self, sample: int, turn: int, proposal: Proposal, meta: dict[str, Any] | None = None) -> Outcome:
        """A proposal's attempt: a reply that held no candidate is recorded as such, a candidate as
        `record_source` records it. The judge call its ask held is spent or freed here, whatever happens."""
        try:
            return self._record(sample, turn, proposal, meta)
        finally:
            self.task_budget.end_ask()

    def _record(self, sample: int, turn: int, proposal: Proposal, meta: dict[str, Any] | None) -> Outcome:
        self._check_abort()
        call_id = self.calls.id_for(proposal)
        if isinstance(proposal.candidate, ParseFailure):
            status = TRUNCATED if isinstance(proposal.candidate, Truncated) else PARSE_FAILED
            feedback = self.coder.feedback(proposal.candidate).content
            note = self.meta(sample, **(meta or {}), parse_error=proposal.candidate.message)
            self.store.record_attempt(self.run_id, self.task.key, sample, turn, status=status,
                                      llm_call_id=call_id, feedback=feedback, meta=note)
            self.emit(SearchEvent("attempt", self.task.key, sample, turn, status))
            return Outcome(status, None, feedback, None)
        return self.record_source(sample, turn, proposal.candidate, meta, llm_call_id=call_id)

    def record_source(self, sample: int, turn: int, source: str, meta: dict[str, Any] | None = None,
                      llm_call_id: int | None = None) -> Outcome:
        """Judge a candidate source (a model's, or one a strategy wrote itself), record the attempt, tell
        the progress display; returns what became of it, with the feedback for the model. A judge error
        parks the step instead (see `_park`)."""
        self._check_abort()
        meta = self.meta(sample, **(meta or {}))
        verdict, vid = self.judge(source)
        self._check_abort()
        if verdict.status is Status.JUDGE_ERROR:
            self._park(sample, turn, verdict, vid, llm_call_id)
        # The source the verdict was measured on (an equal one judged before, when reused): what
        # `outcome_of` gives on resume, so the prompts built from this outcome come out the same.
        source = self.store.candidate_source(vid)
        feedback = self.feedback(verdict, vid)
        speedup = verdict.effective_speedup if verdict.correct else None
        self.store.record_attempt(self.run_id, self.task.key, sample, turn, status=verdict.status.value,
                                  llm_call_id=llm_call_id, verdict_id=vid, speedup=speedup, feedback=feedback, meta=meta)
        self.emit(SearchEvent("attempt", self.task.key, sample, turn, verdict.status.value, speedup))
        return Outcome(verdict.status.value, speedup, feedback, source, vid)

    def _park(self, sample: int, turn: int, verdict: Verdict, vid: int, llm_call_id: int | None) -> NoReturn:
        """Leave a step whose evaluation failed on the judge's side pending: nothing is recorded as the
        candidate's attempt, the model is told nothing, and `held` gives the step back on resume."""
        self.save(_held_key(sample, turn), {"verdict_id": vid, "llm_call_id": llm_call_id})
        self.parked.judge_error(verdict.message)
        raise Parked(f"the judge failed on its side: {verdict.message}")

    def held(self, sample: int, turn: int) -> HeldStep | None:
        """The step a judge error parked before a stop (see `_park`), or None."""
        saved = self.saved(_held_key(sample, turn))
        if saved is None:
            return None
        call = saved["llm_call_id"]
        return HeldStep(self.store.candidate_source(saved["verdict_id"]), call,
                        self.store.llm_reply(call) if call is not None else None)

    def attempt(self, sample: int, turn: int, messages: list[Message], meta: dict[str, Any] | None = None,
                reply_meta: Callable[[str], dict[str, Any]] | None = None, draw: int | None = None) -> Outcome:
        """One single-shot slot: the recorded outcome if a stopped run already did it, the held source judged
        again if a judge error parked it, else ask, judge, record (with `reply_meta` of the reply added to the
        note). `draw` (default `sample`) is the sample index the request carries: a slot that may ask a prompt
        asked before passes one of its own, or the request, its key and so its reply would be the earlier one's.
        A call that failed for good (after retries) is recorded as such; run-stopping errors raise."""
        prior = self.prior_attempt(sample, turn)
        if prior is not None:
            return self.outcome_of(prior)
        held = self.held(sample, turn)
        if held is not None:
            extra = reply_meta(held.reply) if reply_meta and held.reply is not None else {}
            return self.record_source(sample, turn, held.source, {**(meta or {}), **extra}, llm_call_id=held.llm_call_id)
        try:
            proposal = self.ask(messages, sample if draw is None else draw)
        except LLMError as e:
            return self.record_llm_error(sample, turn, e, meta)
        try:
            extra = reply_meta(proposal.reply.text) if reply_meta else {}
        except BaseException:
            self.task_budget.end_ask()
            raise
        return self.record(sample, turn, proposal, {**(meta or {}), **extra})

    def record_llm_error(self, sample: int, turn: int, error: Exception, meta: dict[str, Any] | None = None) -> Outcome:
        self.task_budget.end_ask()
        self._check_abort()
        self.store.record_attempt(self.run_id, self.task.key, sample, turn, status=LLM_ERROR, feedback=str(error),
                                  meta=self.meta(sample, **(meta or {})))
        self.emit(SearchEvent("attempt", self.task.key, sample, turn, LLM_ERROR, message=str(error)))
        return Outcome(LLM_ERROR, None, str(error), None)

    def end_repeating(self, sample: int, turns: int) -> None:
        """Say that `sample` ended after `turns` turns for giving one answer `REPEAT_LIMIT` times in a row
        (repeats.py): on the progress display, and in the store for the report (`repeated_samples`)."""
        self.save(f"{REPEATED}{sample}", turns)
        self.emit(SearchEvent("sample_stopped", self.task.key, sample, turns - 1, message=repeat_note(sample, turns)))

    def prior_attempt(self, sample: int, turn: int) -> AttemptRow | None:
        """The attempt recorded for this slot before the run was stopped, if any."""
        return next((a for a in self.prior if a.sample == sample and a.turn == turn), None)

    def outcome_of(self, attempt: AttemptRow) -> Outcome:
        """A recorded attempt as an Outcome (what a resumed strategy rebuilds its state from)."""
        source = self.store.candidate_source(attempt.verdict_id) if attempt.verdict_id is not None else None
        return Outcome(attempt.status, attempt.speedup, attempt.feedback, source, attempt.verdict_id)

    def reply_of(self, attempt: AttemptRow) -> str | None:
        return self.store.llm_reply(attempt.llm_call_id) if attempt.llm_call_id is not None else None

    def saved(self, key: str) -> Any:
        """A decision this task's search saved before a stop (None if none)."""
        return self.store.state(self.run_id, self.task.key, key)

    def save(self, key: str, value: Any) -> None:
        self.store.put_state(self.run_id, self.task.key, key, value)


def run_parallel(jobs: Iterable[Callable[[], T]], name: str) -> list[T]:
    """Run jobs in threads (model calls and judge evaluations have their own limits below); when some
    fail, raise RunStopped first: a stopping run outranks one task's failure."""
    jobs = list(jobs)
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix=f"kc-{name}") as pool:
        futures = [pool.submit(job) for job in jobs]
        errors = [f.exception() for f in futures]
    for e in sorted((e for e in errors if e is not None), key=lambda e: not isinstance(e, RunStopped)):
        raise e
    return [f.result() for f in futures]


class Scored(Protocol):
    """An attempt as best_attempt sees it (the store's rows and the report's records both are)."""

    @property
    def status(self) -> str: ...
    @property
    def speedup(self) -> float | None: ...
    @property
    def sample(self) -> int: ...
    @property
    def turn(self) -> int: ...
    @property
    def meta(self) -> dict[str, Any]: ...


A = TypeVar("A", bound=Scored)
SCREENING = "screening"  # an attempt's note: judged with a short recipe to rank candidates, never a task's result


def ranked_attempts(attempts: Iterable[A]) -> list[A]:
    """The correct attempts, highest effective speedup first, screening attempts left out; of equals, the
    earliest turn first."""
    correct = sorted((a for a in attempts if a.status == "correct" and a.speedup is not None and not a.meta.get(SCREENING)),
                     key=lambda a: (a.turn, a.sample))
    return sorted(correct, key=lambda a: -a.speedup)  # a stable sort keeps the earliest of equals first


def best_attempt(attempts: Iterable[A]) -> A | None:
    """The first of `ranked_attempts`: the correct attempt with the highest effective speedup; of equals,
    the earliest turn."""
    ranked = ranked_attempts(attempts)
    return ranked[0] if ranked else None

