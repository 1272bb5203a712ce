"""The interface every search strategy implements, and what a strategy is given for one task.

A strategy decides which prompts to send and which candidates to judge; `TaskContext` does the
rest the same way for all of them: judging (each distinct source once per task), recording every
attempt in the store, telling the run's progress display, and stopping when the run must stop.
Strategies of later issues (idea branching, contrastive exemplars, evolution) plug in beside
`refine` by registering in `STRATEGIES`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ..agents import Coder, ParseFailure, Proposal
from ..judge import Job, LocalPool, Result, Verdict, source_hash
from ..llm import BatchPending, BudgetExceeded, CallRecord, EndpointError, Message
from ..store import AttemptRow, Store
from ..tasks import Task
from .config import SearchConfig

PARSE_FAILED = "parse_failed"
LLM_ERROR = "llm_error"


class RunStopped(Exception):
    """The whole run must stop now (budget spent, batch replies pending, endpoint gone); what was
    recorded stays, and `--resume` continues."""


class TaskFailed(Exception):
    """The task itself cannot be run (its reference fails): no candidate can be judged."""


# Model errors that end the run, not one sample: every later call would fail the same way.
RUN_STOPPING_ERRORS = (BudgetExceeded, BatchPending, EndpointError)


@dataclass(frozen=True)
class SearchEvent:
    """Progress, as a strategy reports it: an attempt judged, or a task finished."""

    kind: str  # "attempt" or "task_done"
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


@dataclass
class TaskContext:
    task: Task
    run_id: str
    config: SearchConfig
    coder: Coder
    store: Store
    pool: LocalPool
    calls: CallLog
    prior: list[AttemptRow]  # attempts a stopped run already recorded for this task
    emit: Callable[[SearchEvent], None]
    stop: threading.Event  # no new model calls; evaluations under way are still recorded
    abort: threading.Event  # interrupted: record nothing more (a killed worker's verdict is no verdict)
    atol: float
    rtol: float
    _judged: dict[str, "Future[tuple[Verdict, int]]"] = field(default_factory=dict)
    _judged_lock: threading.Lock = field(default_factory=threading.Lock)

    def ask(self, messages: list[Message], sample: int) -> Proposal:
        """The coder's answer; a run-stopping model error sets `stop` and raises RunStopped."""
        if self.stop.is_set():
            raise RunStopped("the run is stopping")
        try:
            return self.coder.propose(messages, task=self.task.key, sample=sample)
        except RUN_STOPPING_ERRORS as e:
            self.stop.set()
            raise RunStopped(str(e)) from None

    def judge(self, source: str) -> tuple[Verdict, int]:
        """The verdict (and its stored id) for `source` on this task; a source already judged in
        this run is not judged again. Raises TaskFailed when the task's reference fails."""
        key = source_hash(source)
        with self._judged_lock:
            future = self._judged.get(key)
            mine = future is None
            if mine:
                future = self._judged[key] = Future()
        if not mine:
            return future.result()
        try:
            result: Result = self.pool.submit(Job(self.task, source, tag="search")).result()
            self._check_abort()
            if result.verdict is None:
                raise TaskFailed(result.error or "the task failed to run")
            vid = self.store.record_verdict(self.task, source, result.verdict, run_id=self.run_id, origin="search")
            future.set_result((result.verdict, vid))
        except BaseException as e:
            future.set_exception(e)
            raise
        return future.result()

    def _check_abort(self) -> None:
        if self.abort.is_set():
            raise RunStopped("interrupted")

    def record(self, sample: int, turn: int, proposal: Proposal) -> str:
        """Judge a proposal (unless it did not parse), record the attempt, tell the progress
        display; returns the feedback for the model."""
        self._check_abort()
        call_id = self.calls.id_for(proposal)
        if isinstance(proposal.candidate, ParseFailure):
            feedback = self.coder.feedback(proposal.candidate).content
            self.store.record_attempt(self.run_id, self.task.key, sample, turn, status=PARSE_FAILED,
                                      llm_call_id=call_id, feedback=feedback)
            self.emit(SearchEvent("attempt", self.task.key, sample, turn, PARSE_FAILED))
            return feedback
        verdict, vid = self.judge(proposal.candidate)
        self._check_abort()
        feedback = self.coder.feedback(verdict).content
        speedup = verdict.effective_speedup if verdict.correct else None
        self.store.record_attempt(self.run_id, self.task.key, sample, turn, status=verdict.status.value,
                                  llm_call_id=call_id, verdict_id=vid, speedup=speedup, feedback=feedback)
        self.emit(SearchEvent("attempt", self.task.key, sample, turn, verdict.status.value, speedup))
        return feedback

    def record_llm_error(self, sample: int, turn: int, error: Exception) -> None:
        self._check_abort()
        self.store.record_attempt(self.run_id, self.task.key, sample, turn, status=LLM_ERROR, feedback=str(error))
        self.emit(SearchEvent("attempt", self.task.key, sample, turn, LLM_ERROR, message=str(error)))


class Strategy(Protocol):
    """Spends the run's budget on one task; raises RunStopped or TaskFailed, or returns when done."""

    def run(self, ctx: TaskContext) -> None: ...


STRATEGIES: dict[str, Callable[[], Strategy]] = {}


def register(name: str) -> Callable[[type], type]:
    def add(cls: type) -> type:
        STRATEGIES[name] = cls
        return cls
    return add


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


A = TypeVar("A", bound=Scored)


def best_attempt(attempts: Iterable[A]) -> A | None:
    """The correct attempt with the highest effective speedup; of equals, the earliest turn."""
    correct = sorted((a for a in attempts if a.status == "correct" and a.speedup is not None), key=lambda a: (a.turn, a.sample))
    return max(correct, key=lambda a: a.speedup, default=None)  # max keeps the first of equals

