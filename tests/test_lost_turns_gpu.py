"""The nine kernels a frontier model wrote that judge 16 turned down for its own reasons
(../shared/real-model-corpus/lost-turns, test data read in place), judged again on a GPU at full size: the two
whose kernels live in an anonymous namespace are the candidate's own and correct, and none of the seven that
were `static_rejected` for `import os` and `try/except` is turned down by the static stage any more.
(`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations


import pytest

from kernelcraft.judge import Job, LocalPool, Result, Status
from kernelcraft.tasks import Task, load_task_file

from .conftest import CORPUS, KERNELBENCH, evaluate_all

LOST = CORPUS / "lost-turns"

ANONYMOUS_NAMESPACE = ["level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish_turn1", "level2_54_Conv2d_Multiply_LeakyReLU_GELU_turn1"]
STATIC_REJECTED = ["level2_41_Gemm_BatchNorm_GELU_ReLU_turn2", "level3_11_VGG16_turn2", "level3_43_MinGPTCausalAttention_turn2",
                   "level1_3_Batched_matrix_multiplication_turn3", "level1_56_conv_standard_2D__asymmetric_input__asymmetric_kernel_turn3",
                   "level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish_turn3", "level2_54_Conv2d_Multiply_LeakyReLU_GELU_turn3"]


def _task(name: str) -> Task:
    level, stem = name.rsplit("_turn", 1)[0].split("_", 1)
    return load_task_file(KERNELBENCH / level / f"{stem}.py")


@pytest.fixture(scope="module")
def lost(gpu_pool: LocalPool) -> dict[str, Result]:
    if not LOST.is_dir() or not KERNELBENCH.is_dir():
        pytest.skip("the real-model corpus's lost turns and KernelBench are not beside the checkout")
    names = ANONYMOUS_NAMESPACE + STATIC_REJECTED
    return evaluate_all(gpu_pool, [Job(_task(n), (LOST / f"{n}.py").read_text(), tag=n) for n in names])


@pytest.mark.gpu
@pytest.mark.parametrize("name", ANONYMOUS_NAMESPACE)
def test_kernels_in_an_anonymous_namespace_are_the_candidates_own(name: str, lost: dict[str, Result]) -> None:
    v = lost[name].verdict
    assert v is not None, lost[name].error
    print(f"[gpu] {name}: {v.status.value} {v.speedup}x coverage {v.coverage}: {v.message[:300]}")
    assert v.status is Status.CORRECT, v.message
    assert v.coverage is not None and v.coverage > 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("name", STATIC_REJECTED)
def test_the_replies_once_rejected_for_os_and_try_pass_the_static_stage(name: str, lost: dict[str, Result]) -> None:
    v = lost[name].verdict
    assert v is not None, lost[name].error
    print(f"[gpu] {name}: {v.status.value} {v.speedup}x coverage {v.coverage}: {v.message[:300]}")
    assert v.status is not Status.STATIC_REJECTED, v.message
