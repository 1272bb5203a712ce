"""A frontier model's first-turn kernels on 10 KernelBench problems (../shared/real-model-corpus, test
data read in place) judged on a GPU at full size: the five the judge found correct stay correct, the
two it blamed for its own failure to write their outputs to disk get a real verdict, and level2/14's
double-precision rewrite is decided against the float64 truth. (`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations

import pytest

from kernelcraft.judge import Job, LocalPool, Result, Status
from kernelcraft.tasks import Task, load_task_file

from .conftest import CORPUS, KERNELBENCH, evaluate_all

CORRECT = ["level1_61_conv_transposed_3D__square_input__square_kernel", "level1_65_conv_transposed_2D__square_input__asymmetric_kernel",
           "level2_45_Gemm_Sigmoid_LogSumExp", "level2_49_ConvTranspose3d_Softmax_Sigmoid", "level2_98_Matmul_AvgPool_GELU_Scale_Max"]
BLAMED = ["level1_5_Matrix_scalar_multiplication", "level1_84_conv_depthwise_2D_asymmetric_input_square_kernel"]
TRUTH = "level2_14_Gemm_Divide_Sum_Scaling"


def _task(name: str) -> Task:
    level, stem = name.split("_", 1)
    return load_task_file(KERNELBENCH / level / f"{stem}.py")


@pytest.fixture(scope="module")
def corpus(gpu_pool: LocalPool) -> dict[str, Result]:
    if not (CORPUS / "turn1").is_dir() or not KERNELBENCH.is_dir():
        pytest.skip("the real-model corpus and KernelBench are not beside the checkout")
    names = CORRECT + BLAMED + [TRUTH]
    return evaluate_all(gpu_pool, [Job(_task(n), (CORPUS / "turn1" / f"{n}.py").read_text(), tag=n) for n in names])


@pytest.mark.gpu
@pytest.mark.parametrize("name", CORRECT)
def test_the_corpus_kernels_found_correct_stay_correct(name: str, corpus: dict[str, Result]) -> None:
    v = corpus[name].verdict
    assert v is not None, corpus[name].error
    assert v.status is Status.CORRECT, v.message


@pytest.mark.gpu
@pytest.mark.parametrize("name", BLAMED)
def test_kernels_the_judge_blamed_for_its_own_disk_get_a_real_verdict(name: str, corpus: dict[str, Result]) -> None:
    v = corpus[name].verdict
    assert v is not None, corpus[name].error
    print(f"[gpu] {name}: {v.status.value}: {v.message[:200]}; resources {v.resources}")
    assert v.status is Status.CORRECT, v.message
    assert v.resources["disk_peak_bytes"] < 1 << 30  # outputs of 4 GB a seed never reach the disk


@pytest.mark.gpu
def test_the_double_precision_rewrite_is_decided_against_the_float64_truth(corpus: dict[str, Result]) -> None:
    v = corpus[TRUTH].verdict
    assert v is not None, corpus[TRUTH].error
    details = v.stage("correctness").details
    print(f"[gpu] {TRUTH}: {v.status.value}: {v.message[:200]}; candidate vs float64: max abs {v.errors.get('max_abs')}, "
          f"rel L2 {v.errors.get('rel_l2')}; fp32 reference vs float64: max abs {v.errors.get('ref_max_abs')}, "
          f"rel L2 {v.errors.get('ref_rel_l2')}")
    assert v.status is Status.CORRECT, v.message
    assert details["truth"] == "float64"
    assert v.errors["max_abs"] < v.errors["ref_max_abs"]  # the candidate is the closer of the two
