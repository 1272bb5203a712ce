"""A task's own budget (`search.task_judge_calls`, `search.task_tokens`), in process with the stub judge of
test_parked: each task stops at its own budget and is finished while the others go on, whatever the strategy; the
judge's own failures cost a task nothing; a resumed run counts what the task spent before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.llm import LLMClient, LLMConfig, make_client
from kernelcraft.search import OptimizeConfig, Optimizer, SearchConfig
from kernelcraft.store import Store

from .scripted import role
from .test_parked import DEVICE, Scripted, StubJudge, answer_rounds, tiny_tasks

LONG = [  # each long enough to spend far more than 3 evaluations a task
    ("refine", {"turns": 10, "samples": 2}),
    ("branch", {"turns": 5, "branch": {"width": 2, "impls": 2}}),
    ("contrastive", {"turns": 10, "samples": 2}),
    ("evolve", {"evolve": {"generations": 20, "parallel": 2}}),
]


def _config(strategy: str, options: dict[str, Any], **budget: Any) -> OptimizeConfig:
    return OptimizeConfig(target="tiny", device="cpu", llm=LLMConfig(model="scripted"),
                          search=SearchConfig(strategy=strategy, **options, **budget))


@pytest.mark.parametrize("strategy, options", LONG, ids=[s for s, _ in LONG])
def test_each_task_stops_at_its_own_judge_calls_and_is_finished(tmp_path: Path, strategy: str, options: dict[str, Any]) -> None:
    tasks = tiny_tasks(3)
    config = _config(strategy, options, task_judge_calls=3)
    with Store(tmp_path / "ws") as store:
        optimizer = Optimizer(config, store, LLMClient(Scripted(), config.llm), StubJudge(), DEVICE)  # type: ignore[arg-type]
        result = optimizer.run(optimizer.start(tasks), tasks)
        assert result.stopped is None and all(t.finished and t.best is not None for t in result.tasks)
        assert [store.judge_calls(result.run_id, t.key) for t in tasks] == [3, 3, 3]


@pytest.mark.parametrize("strategy, options", LONG, ids=[s for s, _ in LONG])
def test_a_task_asks_for_no_reply_it_could_not_judge(tmp_path: Path, strategy: str, options: dict[str, Any]) -> None:
    # Every strategy asks for several replies at once (2 samples, 2 ideas x 2 implementations, 2 children): at 3
    # judge calls a task, a model asked for a 4th kernel would be paid for a reply no judge looks at.
    tasks = tiny_tasks(2)
    config = _config(strategy, options, task_judge_calls=3)
    backend = Scripted()
    with Store(tmp_path / "ws") as store:
        optimizer = Optimizer(config, store, LLMClient(backend, config.llm), StubJudge(), DEVICE)  # type: ignore[arg-type]
        result = optimizer.run(optimizer.start(tasks), tasks)
        assert result.stopped is None and all(t.finished for t in result.tasks)
        for t in tasks:
            coder = [r for r in backend.asked if r.task == t.key and r.purpose == "coder"]
            assert len(coder) == store.judge_calls(result.run_id, t.key) == 3


@pytest.mark.parametrize("strategy, options", LONG, ids=[s for s, _ in LONG])
def test_a_batch_round_holds_no_request_the_task_could_not_judge(tmp_path: Path, strategy: str, options: dict[str, Any]) -> None:
    # The same through batch rounds, where every line of work asks at once, and the run still finishes every task.
    tasks = tiny_tasks(2)
    batch = tmp_path / "batch"
    config = OptimizeConfig(target="tiny", device="cpu", llm=LLMConfig.from_spec(f"batch:{batch}:frontier"),
                            search=SearchConfig(strategy=strategy, **options, task_judge_calls=3))
    with Store(tmp_path / "ws") as store:
        first = Optimizer(config, store, make_client(config.llm), StubJudge(), DEVICE)  # type: ignore[arg-type]
        run_id = first.start(tasks)
        result = first.run(run_id, tasks)
        for _ in range(12):
            if result.stopped is None:
                break
            answer_rounds(batch)
            result = Optimizer(config, store, make_client(config.llm), StubJudge(), DEVICE).run(run_id, tasks)  # type: ignore[arg-type]
        assert result.stopped is None and all(t.finished for t in result.tasks)
        requests = [json.loads(line) for p in batch.glob("round-*.requests.jsonl") for line in p.read_text().splitlines()]
        coder = [q for q in requests if role(q["body"]["messages"]) == "coder"]
        # A line whose reply came in may reach its hold after a line that asks anew took the last call: at most one
        # request a task, at the end of its budget, goes unjudged (every line asking at once would leave several).
        assert sum(store.judge_calls(run_id, t.key) for t in tasks) == 6 and 6 <= len(coder) <= 6 + len(tasks)


def test_each_task_stops_at_its_own_tokens(tmp_path: Path) -> None:
    tasks = tiny_tasks(2)
    config = _config("refine", {"turns": 10, "samples": 1}, task_tokens=250)  # the stub's replies: 150 tokens each
    backend = Scripted()
    with Store(tmp_path / "ws") as store:
        optimizer = Optimizer(config, store, LLMClient(backend, config.llm), StubJudge(), DEVICE)  # type: ignore[arg-type]
        result = optimizer.run(optimizer.start(tasks), tasks)
        assert result.stopped is None and all(t.finished for t in result.tasks)
        for t in tasks:  # asked while under the cap: 0, then 150; at 300 the task stops
            assert store.run_spend(result.run_id, t.key)[1:3] == (200, 100) and store.judge_calls(result.run_id, t.key) == 2
    assert len(backend.asked) == 4


def test_the_judges_own_failure_costs_the_task_nothing_and_a_resume_counts_what_it_spent(tmp_path: Path) -> None:
    (task,) = tiny_tasks(1)
    config = _config("refine", {"turns": 10, "samples": 1}, task_judge_calls=2)
    judge = StubJudge(judge_errors=1)
    with Store(tmp_path / "ws") as store:
        first = Optimizer(config, store, LLMClient(Scripted(), config.llm), judge, DEVICE)  # type: ignore[arg-type]
        run_id = first.start([task])
        assert "failed on the judge's side" in (first.run(run_id, [task]).stopped or "")
        backend = Scripted()
        resumed = Optimizer(config, store, LLMClient(backend, config.llm), judge, DEVICE).run(run_id, [task])  # type: ignore[arg-type]
        assert resumed.stopped is None and resumed.tasks[0].finished
        assert store.judge_calls(run_id, task.key) == 3 and store.judge_calls(run_id, task.key, judge_errors=False) == 2
        assert [a.status for a in store.attempts(run_id)] == ["correct", "correct"]
    assert len(backend.asked) == 1  # the parked step judged again from its stored source, then one more turn


def test_a_judge_failure_leaves_its_call_to_the_tasks_other_lines(tmp_path: Path) -> None:
    (task,) = tiny_tasks(1)
    config = _config("refine", {"turns": 10, "samples": 2}, task_judge_calls=2)
    with Store(tmp_path / "ws") as store:
        optimizer = Optimizer(config, store, LLMClient(Scripted(), config.llm), StubJudge(judge_errors=1), DEVICE)  # type: ignore[arg-type]
        run_id = optimizer.start([task])
        result = optimizer.run(run_id, [task])
        # one sample's first evaluation failed on the judge's side and waits for a resume; the other spent both calls
        assert "failed on the judge's side" in (result.stopped or "") and not result.tasks[0].finished
        assert store.judge_calls(run_id, task.key, judge_errors=False) == 2
