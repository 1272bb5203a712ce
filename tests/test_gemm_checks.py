"""The judge's GEMM checks (a task's `checks`): inputs of 0s and 1s compared exactly against a
float64 reference, and guard zones around inputs and output. Red-team cases cover the verdicts;
these tests show which check catches what, and the pieces on their own."""

from __future__ import annotations

import pytest
import torch

from kernelcraft.judge import Job, Judge, LocalPool
from kernelcraft.judge.worker.compare import compare_tensors
from kernelcraft.judge.worker.guard_zones import CANARY, guard_inputs, guarded_output
from kernelcraft.tasks import load_task_file
from kernelcraft.tasks.runtime import exec_module, make_inputs

from .conftest import FAST, evaluate_all
from .redteam.cases import CANDIDATES_DIR, TASKS_DIR

TASK = load_task_file(TASKS_DIR / "hgemm.py")
TASK_ELEMENTS = 192 * 256


def test_only_the_exact_check_catches_a_bf16_rounded_gemm(cpu_judge: Judge) -> None:
    source = (CANDIDATES_DIR / "11_gemm_bf16_round.py").read_text()
    without = cpu_judge.evaluate(TASK, source, config=FAST.with_overrides({"binary_seeds": 0}))
    assert without.correct, without.message  # random inputs at fp16 tolerance cannot tell
    caught = cpu_judge.evaluate(TASK, source, config=FAST)
    assert caught.status.value == "incorrect" and "0s and 1s" in caught.message, caught.message


def test_an_honest_gemm_passes_with_what_each_check_looked_at(cpu_judge: Judge) -> None:
    v = cpu_judge.evaluate(TASK, (CANDIDATES_DIR / "honest_hgemm_triton.py").read_text(), config=FAST)
    assert v.correct, v.message
    details = v.stage("correctness").details
    binary = details["binary_exact"]
    assert len(binary) == FAST.binary_seeds
    assert all(b["checked"] >= 0.5 * TASK_ELEMENTS for b in binary)
    assert details["guard_zones"]["output"] and not details["guard_zones"]["output"][0]["armed"]  # no CUDA allocator here


def test_writes_past_an_input_hit_its_guard_zone(cpu_judge: Judge) -> None:
    v = cpu_judge.evaluate(TASK, (CANDIDATES_DIR / "16_gemm_write_past_input.py").read_text(), config=FAST)
    assert v.status.value == "incorrect" and "outside its result" in v.message and "input" in v.message, v.message


def test_binary_inputs_are_zeros_and_ones_with_the_given_share() -> None:
    module = exec_module(TASK.source, "task.py", "t")
    a, b = make_inputs(module, 7, torch.device("cpu"), torch.float16, binary_p=0.25)
    assert a.dtype == torch.float16 and set(a.unique().tolist()) == {0.0, 1.0}
    assert abs(float(a.float().mean()) - 0.25) < 0.02
    again = make_inputs(module, 7, torch.device("cpu"), torch.float16, binary_p=0.25)
    assert torch.equal(a, again[0]) and torch.equal(b, again[1])


def test_guard_zones_see_a_write_one_byte_past_an_input() -> None:
    x = torch.randn(10, 10)
    zones = guard_inputs([x, 3])
    view = zones.inputs[0]
    assert torch.equal(view, x) and zones.inputs[1] == 3 and zones.breached() == []
    _, buf, lo, hi = zones.buffers[0]
    buf[hi] = CANARY - 1
    assert zones.breached() == [0]


def test_the_output_guard_is_not_armed_without_cuda() -> None:
    with guarded_output(4096, torch.device("cpu")) as g:
        out = torch.zeros(1024)
    g.check([out])
    assert g.describe() == {"armed": False, "output_in_slot": False, "breached_bytes": 0}


def test_nan_in_the_exact_reference_marks_elements_not_checked() -> None:
    expected = torch.tensor([1.0, float("nan"), 3.0], dtype=torch.float16)
    assert compare_tensors(torch.tensor([1.0, 99.0, 3.0], dtype=torch.float16), expected, 0.0, 0.0, nan_skips=True).ok
    m = compare_tensors(torch.tensor([1.0, 99.0, 4.0], dtype=torch.float16), expected, 0.0, 0.0, nan_skips=True)
    assert not m.ok and m.bad == 1 and m.total == 2


@pytest.mark.gpu
def test_on_cuda_the_output_lands_right_before_the_judges_guard(gpu_pool: LocalPool) -> None:
    jobs = [Job(TASK, (CANDIDATES_DIR / f"{name}.py").read_text(), tag=name, config=FAST)
            for name in ("honest_hgemm_triton", "16_gemm_unmasked_store")]
    results = evaluate_all(gpu_pool, jobs)
    honest = results["honest_hgemm_triton"].verdict
    assert honest.correct, honest.message
    guards = honest.stage("correctness").details["guard_zones"]["output"]
    assert all(g["armed"] and g["output_in_slot"] and g["breached_bytes"] == 0 for g in guards), guards
    bad = results["16_gemm_unmasked_store"].verdict
    assert bad.status.value == "incorrect" and "after the output" in bad.message, bad.message
