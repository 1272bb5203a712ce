"""How a strategy's work on a task ends early."""

from __future__ import annotations

from ..llm import BudgetExceeded, EndpointError


class RunStopped(Exception):
    """The whole run must stop now (budget spent, endpoint gone); what was recorded stays, and
    `--resume` continues."""


class Parked(RunStopped):
    """One line of work (a sample, a branch, a child) cannot go on in this invocation: its model reply
    is not in yet (batch), or the judge failed on its own side. It stops there while the rest of the run
    goes on; the run stops once every task has finished or parked, and `--resume` takes it up again."""


class TaskFailed(Exception):
    """The task itself cannot be run (its reference fails): no candidate can be judged."""


class TaskBudgetSpent(Exception):
    """The task's own budget (`search.task_judge_calls`, `search.task_tokens`) is spent: the task asks and judges
    nothing more and is finished. Not a RunStopped: the run's other tasks go on."""


# Model errors that end the run, not one sample: every later call would fail the same way.
RUN_STOPPING_ERRORS = (BudgetExceeded, EndpointError)
