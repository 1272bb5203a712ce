"""What the RL environment judges with: any `Evaluator` (a Judge, an executor through `ExecutorJudge`, the reward
service's client), and `ReusedVerdicts`, which judges each distinct candidate once by judge.reuse's rules, as
search and the judge service do."""

from __future__ import annotations

import threading
import time
from typing import Protocol

from ..judge import Executor, Job, Judge, JudgeConfig, TaskRunError, Verdict, describe_device
from ..judge.reuse import MemoryVerdicts, VerdictReuse, VerdictStore, remeasure_context, verdict_context
from ..tasks import Task


class Evaluator(Protocol):
    """What the environment needs of a judge: a Judge, a JudgeClient of the reward service, ReusedVerdicts."""

    def evaluate(self, task: Task, source: str) -> Verdict: ...


class ExecutorJudge:
    """An executor (judge.open_executor: this machine's GPUs, a Ray cluster's) as an Evaluator: each evaluation a
    job, several at once from the environment's threads. `close` closes the executor."""

    def __init__(self, executor: Executor, config: JudgeConfig) -> None:
        self.executor = executor
        self.config = config
        self.device_name = executor.description.name

    def evaluate(self, task: Task, source: str) -> Verdict:
        result = self.executor.submit(Job(task, source, config=self.config)).result()
        if result.verdict is None:  # the task itself failed, as Judge.evaluate says it
            raise TaskRunError(result.error or "the task failed to run")
        return result.verdict

    def close(self) -> None:
        self.executor.close()


class ReusedVerdicts:
    """An evaluator that judges each distinct candidate of a task once (equal up to comments and whitespace) and
    hands out its verdict again, by judge.reuse's rules (timeouts and judge errors are judged again): RL samples
    repeat candidates often. A re-measurement of an outsized win (`remeasure`) is also taken once per candidate.

    With a `store` (the workspace's), verdicts are read from and recorded in it, under `run_id`: the evaluator must
    then be a local Judge, whose settings and device name the verdicts' context. Without one, they are kept in
    memory for this object's life: for an evaluator elsewhere (the judge service, which reuses from its own
    workspace) and for tests. Thread-safe."""

    def __init__(self, evaluator: Evaluator, store: VerdictStore | None = None, *, run_id: str | None = None) -> None:
        if store is not None and not isinstance(evaluator, (Judge, ExecutorJudge)):
            raise TypeError("a store's verdicts need a local judge's context: pass no store for an evaluator elsewhere")
        self.evaluator = evaluator
        self.config = getattr(evaluator, "config", None)  # a Judge's settings (tolerances), seen through the cache
        # an evaluator elsewhere keeps its device to itself: in memory, the task and the settings are the context
        self.device_name = (describe_device(evaluator.device, evaluator.device_index).name if isinstance(evaluator, Judge)
                            else evaluator.device_name if isinstance(evaluator, ExecutorJudge) else "")
        self.reuse = VerdictReuse(store if store is not None else MemoryVerdicts(), origin="train", run_id=run_id)
        self.evaluations = 0  # new evaluations, and the seconds they took (summed over threads)
        self.seconds = 0.0
        self._lock = threading.Lock()

    def evaluate(self, task: Task, source: str) -> Verdict:
        return self._judged(task, source, again=False)

    def remeasure(self, task: Task, source: str) -> Verdict:
        """A second measurement of `source`, for an outsized win (rewards.coder_reward's `remeasure`)."""
        return self._judged(task, source, again=True)

    def _judged(self, task: Task, source: str, again: bool) -> Verdict:
        context = verdict_context(task, self.config if isinstance(self.config, JudgeConfig) else JudgeConfig(),
                                  self.device_name)
        context = remeasure_context(context) if again else context
        return self.reuse.judge(task, source, context, lambda: self._timed(task, source, again)).verdict

    def _timed(self, task: Task, source: str, again: bool) -> Verdict:
        started = time.monotonic()
        try:
            fresh = getattr(self.evaluator, "remeasure", None) if again else None  # a service asks for a fresh verdict
            return (fresh or self.evaluator.evaluate)(task, source)
        finally:
            with self._lock:
                self.evaluations += 1
                self.seconds += time.monotonic() - started
