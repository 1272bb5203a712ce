"""The executors' affinity queue: a task stays with the judge that took it first, a free judge takes a new task
before another judge's, and idles only when nothing is queued."""

from __future__ import annotations

from kernelcraft.judge import Job
from kernelcraft.judge.affinity import AffinityQueue, Pending
from kernelcraft.tasks import resolve_task


def _queue(*names: str) -> AffinityQueue:
    q = AffinityQueue()
    for i, name in enumerate(names):
        q.put(Pending(Job(resolve_task(name), f"# candidate {i}", tag=f"{name}#{i}")))
    return q


def test_a_task_stays_with_the_judge_that_took_it_first() -> None:
    q = _queue("swish_residual", "softmax_rows", "swish_residual", "softmax_rows")
    assert q.take(0).job.tag == "swish_residual#0"
    assert q.take(1).job.tag == "softmax_rows#1"
    assert q.take(1).job.tag == "softmax_rows#3"  # its own task, though swish_residual#2 was queued first
    assert q.take(0).job.tag == "swish_residual#2"
    assert q.take(0) is None


def test_a_judge_takes_a_new_task_before_another_judges_and_steals_rather_than_idle() -> None:
    q = _queue("swish_residual", "swish_residual", "softmax_rows")
    assert q.take(0).job.tag == "swish_residual#0"
    assert q.take(1).job.tag == "softmax_rows#2"  # not judge 0's task
    assert q.take(1).job.tag == "swish_residual#1"  # nothing else left: judge 1 takes it
    assert len(q) == 0


def test_a_lost_judges_tasks_go_to_whoever_is_free_and_a_requeued_job_goes_first() -> None:
    q = _queue("swish_residual", "swish_residual", "softmax_rows")
    lost = q.take(0)
    q.forget(0)
    q.put(lost, first=True)
    assert q.take(1) is lost
    assert q.take(1).job.tag == "swish_residual#1"
