"""CUDA-L2's published H100 kernels under the judge (`-m gpu`, on Hopper, with the set brought to the device:
scripts/gpu-check exports KERNELCRAFT_CUDA_L2 when the call carries .cuda-l2). The 4096^3 kernel, a CUTLASS
GemmUniversal instantiated in its own source (a `static` kernel: its stub's name carries an internal-linkage
marker the profiler's lacks), is exact and its own kernel does the work, also judged as hgemm-wt (B given as the
K-major weight, no copy); the 1024^3 kernel accumulates in fp16 and is incorrect at fp16 tolerance."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelcraft.judge import Job, LocalPool, Status
from kernelcraft.kernels.external import import_kernel_set
from kernelcraft.kernels.gemm import DeviceCaps
from kernelcraft.kernels.gemm.cutlass import cutlass_runs_on
from kernelcraft.tasks import Shape, hgemm_task

from .conftest import evaluate_all


@pytest.mark.gpu
def test_cuda_l2_kernels_get_real_verdicts(gpu_pool: LocalPool) -> None:
    import torch

    root = os.environ.get("KERNELCRAFT_CUDA_L2")
    if not root:
        pytest.skip("the CUDA-L2 set is not here (carry .cuda-l2; see scripts/gpu-check)")
    if not cutlass_runs_on(DeviceCaps("cuda", torch.cuda.get_device_capability())):
        pytest.skip("CUDA-L2's H100 kernels are built for Hopper (compute capability 9.0) with CUTLASS's headers")
    shapes = [Shape(4096, 4096, 4096), Shape(1024, 1024, 1024)]
    imported = import_kernel_set("cuda-l2", Path(root), shapes)
    assert [k.shape for k in imported.kernels] == shapes
    (weight,) = import_kernel_set("cuda-l2", Path(root), shapes[:1], "hgemm-wt").kernels  # B as the K-major weight
    jobs = [Job(hgemm_task(k.shape, k.family), k.source, tag=k.task_key.replace("hgemm/", ""))
            for k in [*imported.kernels, weight]]
    results = evaluate_all(gpu_pool, jobs)
    as_weight = results["hgemm-wt/4096x4096x4096"].verdict
    assert as_weight is not None and as_weight.status is Status.CORRECT, as_weight and as_weight.message
    assert as_weight.stage("audit").details["coverage"]["coverage"] > 0.5
    big = results["4096x4096x4096"].verdict
    assert big is not None and big.status is Status.CORRECT, big and big.message
    coverage = big.stage("audit").details["coverage"]
    assert coverage["coverage"] > 0.5, coverage  # the CUTLASS kernel it instantiates is its own
    small = results["1024x1024x1024"].verdict
    assert imported.kernels[1].origin["accumulator"] == "fp16"
    assert small is not None and small.status is Status.INCORRECT, small and small.message
