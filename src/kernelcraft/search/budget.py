"""The run's budget beyond the model's tokens and dollars (which the LLM client enforces): judge
calls, counted over the whole run (resumes included, from the store; a verdict reused for a repeated
kernel counts as a call, so a model that repeats itself cannot run on), and wall time, counted for
this invocation. Spending either stops the run the way a spent token budget does: no new work,
what is under way is recorded, `--resume` continues.

A task's own budget (`TaskBudget`: judge calls and model tokens per task, resumes included) ends that
task alone, as finished: the same budget for every task, so strategies compare at equal cost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .errors import Parked, RunStopped, TaskBudgetSpent


class JudgeBudget:
    def __init__(self, max_judge_calls: int | None, max_wall_s: float | None, used_judge_calls: int = 0) -> None:
        self.max_judge_calls = max_judge_calls
        self.used = used_judge_calls
        self.deadline = None if max_wall_s is None else time.monotonic() + max_wall_s
        self._lock = threading.Lock()

    def check_time(self) -> None:
        """Raise RunStopped once the wall-time budget is spent."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise RunStopped("the wall-time budget is spent")

    def claim_judge_call(self) -> None:
        """Count one judge call (an evaluation, or a verdict reused), or raise RunStopped when none is left."""
        self.check_time()
        with self._lock:
            if self.max_judge_calls is not None and self.used >= self.max_judge_calls:
                raise RunStopped(f"the judge budget is spent: {self.used} of {self.max_judge_calls} judge calls")
            self.used += 1


class TaskBudget:
    """One task's budget: judge evaluations (those the judge failed on its own side are not the task's) and model
    tokens (prompt and completion, cached replies free), each counted from the store so resumes add up. Tokens are
    checked before each model call, so a task may end up to one round of replies over its token cap."""

    def __init__(self, max_judge_calls: int | None, max_tokens: int | None, used_judge_calls: int = 0,
                 tokens_spent: Callable[[], int] = lambda: 0) -> None:
        self.max_judge_calls = max_judge_calls
        self.max_tokens = max_tokens
        self.used = used_judge_calls
        self._tokens_spent = tokens_spent
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # Coder asks whose candidate is not judged yet hold a judge call each, so a task never asks for more replies
        # than it can judge; asks parked for a batch reply keep theirs for the rest of this invocation.
        self._holding = 0
        self._parked = 0
        self._mine = threading.local()  # whether this thread's ask holds a call (an ask and its judging share a thread)

    def check(self) -> None:
        """Raise TaskBudgetSpent when the task may ask the model nothing more: its judge calls are spent (a reply
        could not be judged) or its tokens are."""
        with self._lock:
            if self.max_judge_calls is not None and self.used >= self.max_judge_calls:
                raise TaskBudgetSpent(f"the task's budget is spent: {self.used} of {self.max_judge_calls} judge calls")
        if self.max_tokens is not None and (spent := self._tokens_spent()) >= self.max_tokens:
            raise TaskBudgetSpent(f"the task's budget is spent: {spent:,} of {self.max_tokens:,} tokens")

    def hold_for_ask(self, *, reply_ready: bool) -> None:
        """Before a coder ask: hold one of the task's judge calls for the candidate its reply brings. A reply already
        in (cached, or in a batch file) is held at once, since it costs no model call. Otherwise, while every call left
        is held by asks under way, wait for one to end; raise Parked when those asks wait for batch replies (the next
        invocation judges them first) and TaskBudgetSpent when no call is left at all."""
        with self._changed:
            if self.max_judge_calls is None or getattr(self._mine, "holds", False):
                return
            while not reply_ready and self.used + self._holding >= self.max_judge_calls:
                if self._holding == 0:
                    raise TaskBudgetSpent(f"the task's budget is spent: {self.used} of {self.max_judge_calls} judge calls")
                if self._holding == self._parked:
                    raise Parked(f"the task's judge calls left are held by {self._parked} replies not in yet")
                self._changed.wait(timeout=5.0)
            self._holding += 1
            self._mine.holds = True

    def park_ask(self) -> None:
        """This thread's ask waits for a batch reply: its call stays held for the rest of this invocation."""
        with self._changed:
            if getattr(self._mine, "holds", False):
                self._mine.holds = False
                self._parked += 1
                self._changed.notify_all()

    def end_ask(self) -> None:
        """This thread's ask ended without a candidate judged (no code, a failed call, a stop): its call is free."""
        with self._changed:
            if getattr(self._mine, "holds", False):
                self._mine.holds = False
                self._holding -= 1
                self._changed.notify_all()

    def claim_judge_call(self) -> None:
        """Count one of the task's judge evaluations (the call this thread's ask held, if it holds one), or raise
        TaskBudgetSpent when none is left."""
        with self._changed:
            holds = getattr(self._mine, "holds", False)
            if holds:
                self._mine.holds = False
                self._holding -= 1
                self._changed.notify_all()
            if self.max_judge_calls is not None and self.used >= self.max_judge_calls:
                raise TaskBudgetSpent(f"the task's budget is spent: {self.used} of {self.max_judge_calls} judge calls")
            self.used += 1

    def release(self) -> None:
        """Give back a claimed call whose evaluation failed on the judge's side: that failure is not the task's."""
        with self._changed:
            self.used -= 1
            self._changed.notify_all()
