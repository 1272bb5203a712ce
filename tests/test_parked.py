"""Parked work, in process with a stub judge (a verdict at once, no worker): a batch run goes as far as
it can before it stops, so every strategy finishes in a fixed number of reply rounds; a verdict that
is the judge's own failure parks its step, which a resume judges again without asking the model."""

from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.judge import DeviceDescription, Job, Result, Status, TimingStats, Verdict
from kernelcraft.llm import ChatRequest, Completion, LLMClient, LLMConfig, Usage, make_client
from kernelcraft.search import OptimizeConfig, Optimizer, RunResult, SearchConfig
from kernelcraft.store import Store
from kernelcraft.tasks import Task

from .scripted import role

DEVICE = DeviceDescription("cpu", "stub-cpu")
DISK_FULL = "the judge could not write a seed's outputs: No space left on device"
_SPEEDUP = re.compile(r"speedup = ([\d.]+)")


def tiny_tasks(n: int) -> list[Task]:
    """Tasks the stub judge never runs: only their text reaches the prompts."""
    source = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
              "        return torch.relu(x) * {i}\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n\n\n"
              "def get_init_inputs():\n    return []\n")
    return [Task(key=f"tiny/{i}", name=f"tiny{i}", source=source.format(i=i + 1)) for i in range(n)]


class StubJudge:
    """Stands in for the judge's pool: every candidate is correct, at the speedup its source names
    (`speedup = X`); the first `judge_errors` evaluations fail on the judge's side instead."""

    def __init__(self, judge_errors: int = 0) -> None:
        self.judge_errors = judge_errors
        self.sources: list[str] = []

    def submit(self, job: Job) -> "Future[Result]":
        self.sources.append(job.source)
        source_hash = hashlib.sha256(job.source.encode()).hexdigest()  # as the judge's verdicts carry it
        if len(self.sources) <= self.judge_errors:
            verdict = Verdict(Status.JUDGE_ERROR, job.task.key, "cpu", message=DISK_FULL, candidate_hash=source_hash)
        else:
            speedup = float(_SPEEDUP.search(job.source).group(1))  # type: ignore[union-attr]
            verdict = Verdict(Status.CORRECT, job.task.key, "cpu", message=f"correct; {speedup:.2f}x", speedup=speedup,
                              significant=True, reference=TimingStats.of([1.0]), candidate=TimingStats.of([1.0 / speedup]),
                              env={"device_name": DEVICE.name}, candidate_hash=source_hash)
        future: Future[Result] = Future()
        future.set_result(Result(job, verdict))
        return future


def answer(messages: list[dict[str, Any]], salt: str) -> str:
    """The scripted model: the planner's ideas, or a kernel of its own whose speedup `salt` (the request)
    decides, one of four, so that equal speedups are common (as kernels within noise of the reference are)."""
    if role(messages) == "planner":
        return '```json\n{"ideas": ["Fuse the scale into the ReLU", "Vectorize the loads"]}\n```'
    digest = hashlib.sha256(salt.encode()).hexdigest()
    speedup = 1.0 + int(digest[:4], 16) % 4 / 4
    return (f"Here it is.\n\n```python\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    speedup = {speedup}\n"
            f"    tag = '{digest[:8]}'\n```\n")


def answer_rounds(directory: Path) -> list[str]:
    """Answer every requests file that has no replies file yet, as a provider's batch API would; the
    files answered."""
    answered = []
    for path in sorted(directory.glob("round-*.requests.jsonl")):
        replies = path.with_name(path.name.replace(".requests.jsonl", ".replies.jsonl").replace("round-", "replies-"))
        if replies.exists():
            continue
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        replies.write_text("".join(json.dumps({"custom_id": q["custom_id"], "error": None, "response": {
            "status_code": 200, "body": {"object": "chat.completion", "model": "frontier", "choices": [{
                "index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": answer(q["body"]["messages"], q["custom_id"])}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 50}}}}) + "\n" for q in lines))
        answered.append(path.name)
    return answered


# Reply rounds a batch run takes to finish, per strategy (see docs/cli.md, "Batch replies"): refine and
# contrastive one per turn, branch two per round (the planner's ideas, then their implementations),
# evolve one per `parallel` children.
ROUNDS = [
    ("refine", {"turns": 3, "samples": 2}, 3, 6, 6),
    ("branch", {"turns": 2, "branch": {"width": 2, "impls": 2}}, 4, 8, 10),
    ("contrastive", {"turns": 3, "samples": 2}, 3, 6, 6),
    ("evolve", {"evolve": {"generations": 6, "parallel": 2, "islands": 2}}, 3, 6, 6),
]


@pytest.mark.parametrize("strategy, options, rounds, attempts, requests", ROUNDS, ids=[r[0] for r in ROUNDS])
def test_a_batch_run_finishes_in_its_strategys_rounds(tmp_path: Path, strategy: str, options: dict[str, Any], rounds: int,
                                                      attempts: int, requests: int) -> None:
    tasks = tiny_tasks(10)  # more tasks than calls in flight (8): the later tasks start as the first ones park
    batch = tmp_path / "batch"
    config = OptimizeConfig(target="tiny", device="cpu", llm=LLMConfig.from_spec(f"batch:{batch}:frontier"),
                            search=SearchConfig(strategy=strategy, **options))
    judge = StubJudge()
    with Store(tmp_path / "ws") as store:
        def invocation() -> Optimizer:  # a new process each time: a fresh client, nothing held over
            return Optimizer(config, store, make_client(config.llm), judge, DEVICE)  # type: ignore[arg-type]

        first = invocation()
        run_id = first.start(tasks)
        result = first.run(run_id, tasks)
        written = []
        while result.stopped is not None:
            assert len(written) < 2 * rounds, result.stopped
            (name,) = answer_rounds(batch)  # every stop wrote exactly one round: all the requests it could make
            written.append(name)
            assert f"in {name} (written now)" in result.stopped and "resume" in result.stopped
            resumed = invocation()
            asked = sum(len(p.read_text().splitlines()) for p in batch.glob("round-*.requests.jsonl"))
            assert resumed.client.survey() == f"batch {batch}: {asked} of {asked} requests have replies, 0 still pending"
            result = resumed.run(run_id, tasks)
        assert len(written) == rounds
        assert all(t.finished and t.attempts == attempts and t.best is not None for t in result.tasks)
        lines = [line for p in batch.glob("round-*.requests.jsonl") for line in p.read_text().splitlines()]
        # None asked twice; contrastive may ask a prompt it asked before (the same exemplars again), which its reply answers.
        assert len(lines) == len({json.loads(line)["custom_id"] for line in lines}) <= 10 * requests
        assert {c.error for c in store.llm_calls(run_id=run_id) if c.error} == {
            "no reply yet: the request is in the round written when the run stops"}


class Scripted:
    """A backend that answers at once, as `answer` does; the first `cut` replies are cut at the token limit."""

    def __init__(self, cut: int = 0) -> None:
        self.cut = cut
        self.asked: list[ChatRequest] = []

    def check(self) -> None:
        pass

    def complete(self, request: ChatRequest, timeout: float) -> Completion:
        self.asked.append(request)
        text = answer([{"role": m.role, "content": m.content} for m in request.messages], request.key())
        if len(self.asked) <= self.cut:
            return Completion(text[:60], Usage(100, request.sampling.max_tokens), "length", "scripted")
        return Completion(text, Usage(100, 50), "stop", "scripted")


def _resumed_run(tmp_path: Path, strategy: str, options: dict[str, Any]) -> tuple[RunResult, RunResult, Scripted, StubJudge, Store]:
    """One task, a model that answers at once, a judge whose first evaluation fails on its side: the run
    that stops, and its resume."""
    tasks = tiny_tasks(1)
    config = OptimizeConfig(target="tiny", device="cpu", llm=LLMConfig(model="scripted"),
                            search=SearchConfig(strategy=strategy, **options))
    backend, judge = Scripted(), StubJudge(judge_errors=1)
    store = Store(tmp_path / "ws")
    first = Optimizer(config, store, LLMClient(backend, config.llm), judge, DEVICE)  # type: ignore[arg-type]
    run_id = first.start(tasks)
    stopped = first.run(run_id, tasks)
    resumed = Optimizer(config, store, LLMClient(backend, config.llm), judge, DEVICE).run(run_id, tasks)  # type: ignore[arg-type]
    return stopped, resumed, backend, judge, store


JUDGE_ERRORS = [
    ("refine", {"turns": 2, "samples": 2}, 4),
    ("branch", {"turns": 1, "branch": {"width": 2, "impls": 1}}, 3),
    ("contrastive", {"turns": 2, "samples": 2}, 4),
    ("evolve", {"evolve": {"generations": 4, "parallel": 2, "islands": 2}}, 4),
]


@pytest.mark.parametrize("strategy, options, calls", JUDGE_ERRORS, ids=[r[0] for r in JUDGE_ERRORS])
def test_a_judge_error_parks_its_step_until_a_resume_judges_it_again(tmp_path: Path, strategy: str, options: dict[str, Any],
                                                                     calls: int) -> None:
    stopped, resumed, backend, judge, store = _resumed_run(tmp_path, strategy, options)
    assert stopped.stopped == (f"1 evaluation failed on the judge's side (1x {DISK_FULL}); --resume judges that candidate "
                               f"again without asking the model")
    assert not stopped.tasks[0].finished and resumed.stopped is None and resumed.tasks[0].finished
    assert len(backend.asked) == calls  # the parked step's reply was judged again, not asked for again
    assert judge.sources.count(judge.sources[0]) == 2  # the failed source, judged again
    attempts = store.attempts(resumed.run_id)
    assert len(attempts) == calls - (1 if strategy == "branch" else 0)  # branch: one call is the planner's
    assert all(a.status == "correct" for a in attempts)  # the judge's failure is no attempt of the candidate
    assert [v.status for v in store.verdicts(run_id=resumed.run_id)].count("judge_error") == 1
    assert not any(DISK_FULL in m.content for r in backend.asked for m in r.messages)  # never shown to the model
    store.close()


def test_a_judge_error_verdict_is_never_reused(tmp_path: Path) -> None:
    (task,) = tiny_tasks(1)
    with Store(tmp_path / "ws") as store:
        failed = Verdict(Status.JUDGE_ERROR, task.key, "cpu", message=DISK_FULL)
        store.record_verdict(task, "class ModelNew: pass\n", failed, norm_hash="n1", context_hash="c")
        assert store.reusable_verdict("c", "n1") is None and store.judged_norm_hashes("c") == set()
        ok = Verdict(Status.INCORRECT, task.key, "cpu", message="wrong")
        vid = store.record_verdict(task, "class ModelNew: pass\n", ok, norm_hash="n1", context_hash="c")
        assert store.reusable_verdict("c", "n1") == vid and store.judged_norm_hashes("c") == {"n1"}


def test_a_reply_cut_at_the_limit_is_recorded_as_truncated_and_the_next_prompt_says_so(tmp_path: Path) -> None:
    tasks = tiny_tasks(1)
    config = OptimizeConfig(target="tiny", device="cpu", llm=LLMConfig(model="scripted", max_tokens=2000),
                            search=SearchConfig(strategy="refine", turns=2, samples=1))
    backend = Scripted(cut=1)
    with Store(tmp_path / "ws") as store:
        optimizer = Optimizer(config, store, LLMClient(backend, config.llm), StubJudge(), DEVICE)  # type: ignore[arg-type]
        result = optimizer.run(optimizer.start(tasks), tasks)
        assert [a.status for a in store.attempts(result.run_id)] == ["truncated", "correct"]
    told = backend.asked[1].messages[-1].content
    assert "cut off at the 2000-token limit" in told and "shorter" in told

