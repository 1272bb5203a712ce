"""The judge on a GPU: every bundled honest CUDA/Triton candidate passes; KernelBench's degenerate
softmax is flagged at its full size. (`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcraft.judge import STAGES, Job, LocalPool, Result, Status
from kernelcraft.tasks import load_task_file, resolve_task

from .conftest import CANDIDATES, evaluate_all

CUDA_CANDIDATES = sorted((CANDIDATES / "cuda").glob("*.py"))


@pytest.fixture(scope="module")
def results(gpu_pool: LocalPool) -> dict[str, Result]:
    return evaluate_all(gpu_pool, [Job(resolve_task(p.stem), p.read_text(), tag=p.stem) for p in CUDA_CANDIDATES])


@pytest.mark.gpu
@pytest.mark.parametrize("path", CUDA_CANDIDATES, ids=[p.stem for p in CUDA_CANDIDATES])
def test_bundled_gpu_candidates_are_correct(path: Path, results: dict[str, Result]) -> None:
    v = results[path.stem].verdict
    assert v is not None, results[path.stem].error
    assert v.status is Status.CORRECT, v.message
    assert [s.name for s in v.stages] == list(STAGES)
    assert v.coverage > 0.5 and v.speedup > 0
    assert v.env["device_name"] and v.stage("timing").details["spot_checks"] >= 1


@pytest.mark.gpu
def test_full_size_softmax_of_the_sample_is_degenerate(gpu_pool: LocalPool, sample: Path) -> None:
    report = gpu_pool.judges[0].vet(load_task_file(sample / "level1" / "23_Softmax.py"))
    assert report["degenerate"]
    assert "zeros_pass" in {f["code"] for f in report["findings"]}
