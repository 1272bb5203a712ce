"""judge.reuse's rules, on the workspace's Store and on MemoryVerdicts alike: one evaluation per normalized source
while it is in flight, timeouts and judge errors judged again, `fresh` honoured, and the context key keeping
verdicts of other judge settings apart; and the RL environment's evaluator reading the workspace's store."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelcraft.judge import Judge, JudgeConfig, Status, Verdict, describe_device
from kernelcraft.judge.reuse import MemoryVerdicts, VerdictReuse, VerdictStore, remeasure_context, verdict_context
from kernelcraft.store import Store
from kernelcraft.tasks import Task, resolve_task
from kernelcraft.train.verdicts import ReusedVerdicts

SOURCE = "class ModelNew:\n    def forward(self, x):\n        return x\n"
SAME = "# a comment changes nothing\nclass ModelNew:\n\n    def forward(self, x):  # nor does this\n        return x\n"
OTHER = "class ModelNew:\n    def forward(self, x):\n        return x + 0\n"


class CountingJudge:
    """Evaluations as a judge would give them, counted; each status in turn (the last repeats)."""

    def __init__(self, task: Task, *statuses: Status) -> None:
        self.task = task
        self.statuses = list(statuses) or [Status.CORRECT]
        self.calls = 0
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, source: str) -> Callable[[], Verdict]:
        def evaluate() -> Verdict:
            with self._lock:
                status = self.statuses[min(self.calls, len(self.statuses) - 1)]
                self.calls += 1
            self.started.set()
            assert self.release.wait(10)
            return Verdict(status, self.task.key, "cpu", message=f"evaluation {self.calls}",
                           candidate_hash=hashlib.sha256(source.encode()).hexdigest())
        return evaluate


@pytest.fixture(params=["store", "memory"])
def verdicts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VerdictStore]:
    if request.param == "memory":
        yield MemoryVerdicts()
        return
    with Store(tmp_path / "ws") as store:
        yield store


@pytest.fixture
def task() -> Task:
    return resolve_task("softmax_rows")


def _context(task: Task, config: JudgeConfig | None = None) -> str:
    return verdict_context(task, config or JudgeConfig(), "cpu0")


def test_equal_sources_in_flight_together_are_evaluated_once(verdicts: VerdictStore, task: Task) -> None:
    reuse, judge = VerdictReuse(verdicts, origin="test"), CountingJudge(task)
    judge.release.clear()  # the first evaluation waits until the second caller has come
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(reuse.judge, task, SOURCE, _context(task), judge(SOURCE))
        assert judge.started.wait(10)
        second = pool.submit(reuse.judge, task, SAME, _context(task), judge(SAME))
        threading.Timer(0.2, judge.release.set).start()  # time for the second caller to join the first
        a, b = first.result(), second.result()
    assert judge.calls == 1
    assert a.verdict_id == b.verdict_id and (a.reused, b.reused) == (False, True)
    later = reuse.judge(task, SAME, _context(task), judge(SAME))  # from the store now
    assert judge.calls == 1 and later.reused and later.verdict_id == a.verdict_id
    assert reuse.judge(task, OTHER, _context(task), judge(OTHER)).verdict_id != a.verdict_id and judge.calls == 2


@pytest.mark.parametrize("status", [Status.TIMEOUT, Status.JUDGE_ERROR])
def test_timeouts_and_judge_errors_are_judged_again(verdicts: VerdictStore, task: Task, status: Status) -> None:
    reuse, judge = VerdictReuse(verdicts, origin="test"), CountingJudge(task, status, Status.CORRECT)
    assert reuse.judge(task, SOURCE, _context(task), judge(SOURCE)).verdict.status is status
    again = reuse.judge(task, SAME, _context(task), judge(SAME))
    assert judge.calls == 2 and again.verdict.status is Status.CORRECT and not again.reused
    assert reuse.judge(task, SOURCE, _context(task), judge(SOURCE)).reused and judge.calls == 2


def test_fresh_is_a_new_evaluation_that_later_callers_reuse(verdicts: VerdictStore, task: Task) -> None:
    reuse, judge = VerdictReuse(verdicts, origin="test"), CountingJudge(task)
    first = reuse.judge(task, SOURCE, _context(task), judge(SOURCE))
    fresh = reuse.judge(task, SOURCE, _context(task), judge(SOURCE), fresh=True)
    assert judge.calls == 2 and not fresh.reused and fresh.verdict_id != first.verdict_id
    assert reuse.judge(task, SOURCE, _context(task), judge(SOURCE)).verdict_id == fresh.verdict_id  # the latest
    assert judge.calls == 2


def test_a_fresh_request_waits_for_no_evaluation_in_flight(task: Task) -> None:
    reuse, judge = VerdictReuse(MemoryVerdicts(), origin="test"), CountingJudge(task)
    judge.release.clear()
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(reuse.judge, task, SOURCE, _context(task), judge(SOURCE))
        assert judge.started.wait(10)
        claim = reuse.claim(task, SOURCE, _context(task), fresh=True)
        assert claim.owner  # judged anew, not handed the one in flight
        judge.release.set()
        first.result()


def test_the_context_key_keeps_other_judge_settings_and_the_remeasurement_apart(verdicts: VerdictStore, task: Task) -> None:
    reuse, judge = VerdictReuse(verdicts, origin="test"), CountingJudge(task)
    short = JudgeConfig().with_overrides({"timing": {"remeasure_above": 100.0}})
    contexts = [_context(task), _context(task, short), verdict_context(task, JudgeConfig(), "another device"),
                remeasure_context(_context(task))]
    assert len(set(contexts)) == len(contexts)
    ids = [reuse.judge(task, SOURCE, c, judge(SOURCE)).verdict_id for c in contexts]
    assert judge.calls == len(contexts) and len(set(ids)) == len(ids)
    assert [reuse.judge(task, SAME, c, judge(SAME)).verdict_id for c in contexts] == ids and judge.calls == len(contexts)


def test_a_failed_evaluation_reaches_its_waiters_and_is_not_kept(task: Task) -> None:
    reuse, started, release = VerdictReuse(MemoryVerdicts(), origin="test"), threading.Event(), threading.Event()

    def broken() -> Verdict:
        started.set()
        assert release.wait(10)
        raise RuntimeError("the pool went away")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(reuse.judge, task, SOURCE, _context(task), broken)
        assert started.wait(10)
        second = pool.submit(reuse.judge, task, SAME, _context(task), CountingJudge(task)(SAME))
        threading.Timer(0.2, release.set).start()
        for f in (first, second):
            with pytest.raises(RuntimeError, match="went away"):
                f.result()
    judge = CountingJudge(task)
    assert not reuse.judge(task, SOURCE, _context(task), judge(SOURCE)).reused and judge.calls == 1


def test_only_run_reuses_that_runs_verdicts_alone(tmp_path: Path, task: Task) -> None:
    with Store(tmp_path / "ws") as store:
        earlier, here = store.start_run("test", {}), store.start_run("test", {})
        judge = CountingJudge(task)
        VerdictReuse(store, origin="test", run_id=earlier).judge(task, SOURCE, _context(task), judge(SOURCE))
        reuse = VerdictReuse(store, origin="test", run_id=here)
        mine = reuse.judge(task, SOURCE, _context(task), judge(SOURCE), only_run=here)
        assert judge.calls == 2 and not mine.reused
        assert reuse.judge(task, SAME, _context(task), judge(SAME), only_run=here).verdict_id == mine.verdict_id
        assert judge.calls == 2


def test_the_training_environment_reuses_the_workspaces_stored_verdicts(tmp_path: Path, task: Task) -> None:
    judge = Judge("cpu", cache_dir=tmp_path / "cache")
    with Store(tmp_path / "ws") as store:
        context = verdict_context(task, judge.config, describe_device("cpu").name)
        stored = VerdictReuse(store, origin="search").judge(task, SOURCE, context, CountingJudge(task)(SOURCE))
        verdicts = ReusedVerdicts(judge, store, run_id=store.start_run("train-rl", {}))
        assert verdicts.evaluate(task, SAME).message == stored.verdict.message and verdicts.evaluations == 0
        with pytest.raises(TypeError, match="local judge"):
            ReusedVerdicts(verdicts, store)
    judge.close()
