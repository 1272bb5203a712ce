"""How a strategy's work on a task ends early."""

from __future__ import annotations

from ..llm import BatchPending, BudgetExceeded, EndpointError


class RunStopped(Exception):
    """The whole run must stop now (budget spent, batch replies pending, endpoint gone); what was
    recorded stays, and `--resume` continues."""


class TaskFailed(Exception):
    """The task itself cannot be run (its reference fails): no candidate can be judged."""


# Model errors that end the run, not one sample: every later call would fail the same way.
RUN_STOPPING_ERRORS = (BudgetExceeded, BatchPending, EndpointError)
