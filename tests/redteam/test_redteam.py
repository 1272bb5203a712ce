"""Every exploit class of docs/judge.md against the real judge: each exploit candidate must
get a verdict its case allows (never `correct` unless the case documents a flag instead), and
the honest controls must pass. CPU cases run in CI; cuda cases are `-m gpu`."""

from __future__ import annotations

import pytest

from kernelcraft.judge import LOW_COVERAGE, Job, Judge, LocalPool, Result, Verdict
from kernelcraft.tasks import load_task_file

from ..conftest import FAST, evaluate_all
from .cases import CANDIDATES_DIR, CASES, TASKS_DIR, Case

CPU = [c for c in CASES if c.device == "cpu"]
GPU = [c for c in CASES if c.device == "cuda"]


def job(case: Case) -> Job:
    config = FAST.with_overrides(case.config) if case.config else None
    return Job(load_task_file(TASKS_DIR / case.task), (CANDIDATES_DIR / case.candidate).read_text(), tag=case.id, config=config)


def check(case: Case, v: Verdict) -> None:
    assert v.status.value in case.expect, f"{case.id}: got {v.status.value}: {v.message} ({case.why})"
    if case.flag:
        assert v.has_flag(case.flag), f"{case.id}: flag {case.flag} missing; flags: {[f.code for f in v.flags]}"
    if v.has_flag(LOW_COVERAGE):  # the rule on library calls: a decoy's win earns no credit
        assert v.effective_speedup is None or v.effective_speedup <= 1.0, f"{case.id}: counted {v.effective_speedup:.2f}x"
    if case.exploit == 1 and v.speedup is not None:
        # work moved to a side stream is still timed: no fake win
        assert v.speedup < 2.0, f"{case.id}: side-stream work escaped the timer ({v.speedup:.1f}x)"


@pytest.mark.parametrize("case", CPU, ids=[c.id for c in CPU])
def test_cpu_case(case: Case, cpu_judge: Judge) -> None:
    j = job(case)
    check(case, cpu_judge.evaluate(j.task, j.source, config=j.config))


@pytest.fixture(scope="module")
def gpu_results(gpu_pool: LocalPool) -> dict[str, Result]:
    return evaluate_all(gpu_pool, [job(c) for c in GPU])


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU, ids=[c.id for c in GPU])
def test_gpu_case(case: Case, gpu_results: dict[str, Result]) -> None:
    r = gpu_results[case.id]
    assert r.verdict is not None, r.error
    check(case, r.verdict)


def test_every_exploit_class_has_a_real_candidate() -> None:
    covered = {c.exploit for c in CASES if c.exploit}
    assert covered >= set(range(1, 18)), sorted(set(range(1, 18)) - covered)
    assert any(c.exploit == 0 and c.device == "cpu" for c in CASES), "honest controls must pass too"
    for c in CASES:
        assert (TASKS_DIR / c.task).is_file() and (CANDIDATES_DIR / c.candidate).is_file(), c.id
        assert c.exploit == 0 or "correct" not in c.expect or c.flag or c.exploit in (1, 12), \
            f"{c.id}: an exploit may pass only with a flag, an honest-timing check, or task vetting"


def test_degenerate_task_is_flagged_by_vetting(cpu_judge: Judge) -> None:
    """Class 12: a constant answer passes the judge on a degenerate task; vetting must flag the task."""
    report = cpu_judge.vet(load_task_file(TASKS_DIR / "degenerate_zero.py"))
    assert report["degenerate"], report
