"""The nine kernels a frontier model wrote that judge 16 turned down for its own reasons
(../shared/real-model-corpus/lost-turns, issue 45), judged again on a GPU at full size: the two whose
kernels live in an anonymous namespace are the candidate's own and correct, and the seven once
`static_rejected` for `import os` and `try` get past the static stage and build, those that ask for sm_90a
through TORCH_CUDA_ARCH_LIST included, with none of the judge's own faults blamed on them. Their verdicts
are printed. (`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations

import pytest

from kernelcraft.judge import Job, LocalPool, Result, Status
from kernelcraft.tasks import Task, load_task_file

from .conftest import CORPUS, KERNELBENCH, evaluate_all
from .test_static import LOST_TO_STATIC

ANONYMOUS_NAMESPACE = ["level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish_turn1.py",
                       "level2_54_Conv2d_Multiply_LeakyReLU_GELU_turn1.py"]


def _task(name: str) -> Task:
    level, stem = name.removesuffix(".py").rsplit("_turn", 1)[0].split("_", 1)
    return load_task_file(KERNELBENCH / level / f"{stem}.py")


@pytest.fixture(scope="module")
def lost(gpu_pool: LocalPool) -> dict[str, Result]:
    if not (CORPUS / "lost-turns").is_dir() or not KERNELBENCH.is_dir():
        pytest.skip("the real-model corpus and KernelBench are not beside the checkout")
    names = ANONYMOUS_NAMESPACE + list(LOST_TO_STATIC)
    return evaluate_all(gpu_pool, [Job(_task(n), (CORPUS / "lost-turns" / n).read_text(), tag=n) for n in names])


@pytest.mark.gpu
@pytest.mark.parametrize("name", ANONYMOUS_NAMESPACE)
def test_kernels_in_an_anonymous_namespace_are_the_candidates_own(name: str, lost: dict[str, Result]) -> None:
    v = lost[name].verdict
    assert v is not None, lost[name].error
    print(f"[gpu] {name}: {v.status.value} {v.speedup or ''} coverage {v.coverage}: {v.message[:300]}")
    assert v.status is Status.CORRECT, v.message
    assert v.coverage is not None and v.coverage > 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("name", LOST_TO_STATIC)
def test_the_lost_turns_get_past_the_static_stage_and_build(name: str, lost: dict[str, Result]) -> None:
    v = lost[name].verdict
    assert v is not None, lost[name].error
    print(f"[gpu] {name}: {v.status.value} {v.speedup or ''}: {v.message[:300]}")
    assert v.status not in (Status.STATIC_REJECTED, Status.BUILD_FAILED, Status.JUDGE_ERROR), v.message
