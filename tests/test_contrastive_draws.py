"""contrastive asks the plain prompt again while it has fewer than two correct kernels: each round must be a new
draw. In the first real bench (2026-11-29, an H200, a frontier model through the batch backend) level1/14's first
round gave one incorrect and one correct kernel; rounds 2 and 3 asked the very same requests, got the same replies,
and spent 3 of the task's 5 judge calls on verdicts judged before."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

from kernelcraft.judge import Job, Result, Status, Verdict
from kernelcraft.llm import LLMClient, LLMConfig
from kernelcraft.search import OptimizeConfig, Optimizer, SearchConfig
from kernelcraft.store import Store

from .test_parked import DEVICE, Scripted, StubJudge, tiny_tasks


class FirstIncorrect(StubJudge):
    """The stub judge, but the first candidate it sees is incorrect: a first round with one correct kernel."""

    def submit(self, job: Job) -> "Future[Result]":
        future = super().submit(job)
        if len(self.sources) > 1:
            return future
        verdict = future.result().verdict
        assert verdict is not None
        wrong: Future[Result] = Future()
        wrong.set_result(Result(job, Verdict(Status.INCORRECT, job.task.key, "cpu", message="incorrect: max abs error 1.0",
                                             candidate_hash=verdict.candidate_hash)))
        return wrong


def test_each_round_of_plain_prompts_is_a_new_draw(tmp_path: Path) -> None:
    (task,) = tiny_tasks(1)
    config = OptimizeConfig(target="tiny", device="cpu", llm=LLMConfig(model="scripted"),
                            search=SearchConfig(strategy="contrastive", turns=6, samples=2, task_judge_calls=5))
    judge, backend = FirstIncorrect(), Scripted()
    with Store(tmp_path / "ws") as store:
        optimizer = Optimizer(config, store, LLMClient(backend, config.llm), judge, DEVICE)  # type: ignore[arg-type]
        result = optimizer.run(optimizer.start([task]), [task])
        assert result.stopped is None and result.tasks[0].finished
        # every judge call of the task went to a kernel not judged before
        assert store.judge_calls(result.run_id, task.key) == 5 == len(set(judge.sources))
        coder = [r.key() for r in backend.asked if r.purpose == "coder"]
        assert len(coder) == len(set(coder)) == 5
