"""The run's budget beyond the model's tokens and dollars (which the LLM client enforces): judge
calls, counted over the whole run (resumes included, from the store; a verdict reused for a repeated
kernel counts as a call, so a model that repeats itself cannot run on), and wall time, counted for
this invocation. Spending either stops the run the way a spent token budget does: no new work,
what is under way is recorded, `--resume` continues."""

from __future__ import annotations

import threading
import time

from .errors import RunStopped


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
