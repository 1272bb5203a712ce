"""Seven replies of a frontier model that judge 16 turned down at the static stage for `import os` and `try`
(../shared/real-model-corpus/lost-turns, issue 45), judged on a GPU at full size under judge 17: each gets past
the static stage and builds, those that ask for sm_90a through TORCH_CUDA_ARCH_LIST included, and the judge
blames none of its own faults on them. Their verdicts are printed. (`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations

import pytest

from kernelcraft.judge import Job, LocalPool, Result, Status
from kernelcraft.tasks import Task, load_task_file

from .conftest import CORPUS, KERNELBENCH, evaluate_all
from .test_static import LOST_TO_STATIC


def _task(name: str) -> Task:
    level, stem = name.removesuffix(".py").rsplit("_turn", 1)[0].split("_", 1)
    return load_task_file(KERNELBENCH / level / f"{stem}.py")


@pytest.fixture(scope="module")
def lost(gpu_pool: LocalPool) -> dict[str, Result]:
    if not (CORPUS / "lost-turns").is_dir() or not KERNELBENCH.is_dir():
        pytest.skip("the real-model corpus and KernelBench are not beside the checkout")
    return evaluate_all(gpu_pool, [Job(_task(n), (CORPUS / "lost-turns" / n).read_text(), tag=n) for n in LOST_TO_STATIC])


@pytest.mark.gpu
@pytest.mark.parametrize("name", LOST_TO_STATIC)
def test_the_lost_turns_get_past_the_static_stage_and_build(name: str, lost: dict[str, Result]) -> None:
    v = lost[name].verdict
    assert v is not None, lost[name].error
    print(f"[gpu] {name}: {v.status.value} {v.speedup or ''}: {v.message[:300]}")
    assert v.status not in (Status.STATIC_REJECTED, Status.BUILD_FAILED, Status.JUDGE_ERROR), v.message
