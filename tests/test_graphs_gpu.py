"""CUDA graphs on a GPU (issue 27): a candidate that captures its own kernel once and replays the graph
on every call, copying the fresh inputs in, is judged by the kernels that ran on the device, not by the
calls of its wrapped functions (a replay calls none). A graph of PyTorch's operators only, or one whose
library kernel bears the name of a kernel of the candidate's, earns no coverage. (`-m gpu`; skipped
without a GPU.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcraft.judge import Job, LocalPool, Result, Status
from kernelcraft.tasks import Shape, hgemm_task, load_task_file, task_from_source

from .conftest import evaluate_all
from .test_judge_gpu import _library_kernel

# 96 operators for PyTorch (3 a step, each reading and writing a 16 MiB tensor), one compute-bound fused kernel
# for the candidate: its device time dwarfs the copies a graph candidate adds (the fresh input in, the output out).
TASK = '''
import torch
import torch.nn as nn

N = 4096
STEPS = 32
KERNELCRAFT = {
    "description": "32 steps of y = sin(y) * 0.9 + 0.1 (CUDA graph test).",
    "dtype": "float32",
    "sizes": {"cuda": {"N": 4194304}},
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x
        for _ in range(STEPS):
            y = torch.sin(y) * 0.9 + 0.1
        return y


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''

# The kernel launches on PyTorch's current stream: a graph captures only the capturing stream's work.
EXTENSION = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void sin_chain_kernel(const float* __restrict__ x, float* __restrict__ y, long n, int steps) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        for (int s = 0; s < steps; ++s) v = sinf(v) * 0.9f + 0.1f;
        y[i] = v;
    }
}

void sin_chain(torch::Tensor x, torch::Tensor y, int64_t steps) {
    const long n = x.numel();
    const long blocks = (n + 255) / 256;
    sin_chain_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n, (int)steps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

_CPP = "void sin_chain(torch::Tensor x, torch::Tensor y, int64_t steps);"
_ext = load_inline(name="kc_test_graph_sin_chain", cpp_sources=[_CPP], cuda_sources=[_CUDA], functions=["sin_chain"],
                   extra_cuda_cflags=["-O3"])
'''

# Captured on the first call of each shape (after a warm-up call outside the capture); every call copies
# the fresh input into the static buffer, replays, and returns a clone: the static output is overwritten
# by the next call, and an output that changes under the judge after it was returned is caching.
HONEST = EXTENSION + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = None

    def forward(self, x):
        key = (tuple(x.shape), x.dtype, x.device)
        if self.key != key:
            self.x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            self.y = torch.empty_like(self.x)
            _ext.sin_chain(self.x, self.y, 32)
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                _ext.sin_chain(self.x, self.y, 32)
            self.key = key
        self.x.copy_(x)
        self.graph.replay()
        return self.y.clone()
'''

# The same extension is built (so the source has a kernel of its own), but the graph holds PyTorch's
# operators only: the replay runs none of the candidate's kernels.
TORCH_ONLY = EXTENSION + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = None

    def body(self):
        y = self.x
        for _ in range(32):
            y = torch.sin(y) * 0.9 + 0.1
        return y

    def forward(self, x):
        key = (tuple(x.shape), x.dtype, x.device)
        if self.key != key:
            self.x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            self.x.copy_(x)
            self.body()
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.y = self.body()
            self.key = key
        self.x.copy_(x)
        self.graph.replay()
        return self.y.clone()
'''

# A Triton kernel named after the cuBLAS kernel that does the product (`LIBRARY`), run in the graph on 64
# elements beside the captured torch.matmul: by name alone, cuBLAS's kernel would be the candidate's.
GRAPH_DECOY = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def LIBRARY(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(c_ptr + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, v + 0.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = None

    def body(self):
        c = torch.matmul(self.a, self.b)
        LIBRARY[(1,)](c, 64, BLOCK=64)
        return c

    def forward(self, a, b):
        key = (tuple(a.shape), tuple(b.shape), a.dtype)
        if self.key != key:
            self.a, self.b = a.clone(), b.clone()
            self.body()
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.c = self.body()
            self.key = key
        self.a.copy_(a)
        self.b.copy_(b)
        self.graph.replay()
        return self.c.clone()
'''


@pytest.fixture(scope="module")
def graph_results(gpu_pool: LocalPool) -> dict[str, Result]:
    task = task_from_source(TASK, "graphs/sin_chain")
    return evaluate_all(gpu_pool, [Job(task, HONEST, tag="honest"), Job(task, TORCH_ONLY, tag="torch_only")])


@pytest.mark.gpu
def test_a_candidate_that_replays_a_graph_of_its_own_kernel_is_judged_by_that_kernel(graph_results: dict[str, Result]) -> None:
    v = graph_results["honest"].verdict
    assert v is not None, graph_results["honest"].error
    assert v.status is Status.CORRECT, v.message
    coverage = v.stage("audit").details["coverage"]
    # No wrapped function ran in the profiled call; the graph's run of the kernel did, and counts.
    assert coverage["calls"] == {} and coverage["graph_launches"] >= 1, coverage
    assert coverage["graph_runs"] >= 1 and coverage["custom_launches"] >= 1, coverage
    assert "sin_chain_kernel" in coverage["custom_kernels"], coverage
    # The copies in and out are PyTorch's: the kernel's share is most of the forward, not all of it.
    assert 0.5 < v.coverage < 1.0, coverage
    assert "low_coverage" not in {f.code for f in v.flags}
    assert v.speedup > 1.0, v.speedup  # 96 launches against one replay and two copies


@pytest.mark.gpu
def test_a_graph_of_pytorch_operators_only_is_no_kernel_of_the_candidates(graph_results: dict[str, Result]) -> None:
    v = graph_results["torch_only"].verdict
    assert v is not None, graph_results["torch_only"].error
    assert v.status is Status.HACK_DETECTED, v.message
    assert "none of the candidate's own kernels ran" in v.message
    coverage = v.stage("audit").details["coverage"]
    assert v.coverage == 0.0 and coverage["custom_kernels"] == [] and coverage["graph_runs"] == 0, coverage
    assert coverage["graph_launches"] >= 1, coverage  # the replay was seen: its kernels are PyTorch's


@pytest.mark.gpu
def test_a_decoy_named_after_the_library_kernel_gets_no_credit_inside_a_graph(gpu_pool: LocalPool) -> None:
    """docs/judge.md, exploit class 10 where no operator's range surrounds the launch: the reference's own kernels'
    names are the library's. (test_judge_gpu's decoy test, the product captured in a graph.)"""
    redteam = Path(__file__).parent / "redteam"
    for task in (load_task_file(redteam / "tasks" / "matmul.py"), hgemm_task(Shape(4096, 4096, 4096))):
        library = _library_kernel(task)
        if library.isidentifier():
            break
    else:
        pytest.skip(f"this device's matmul kernels have no plain name to imitate: {library[:80]}")
    v = evaluate_all(gpu_pool, [Job(task, GRAPH_DECOY.replace("LIBRARY", library), tag="graph_decoy")])["graph_decoy"].verdict
    assert v is not None
    coverage = v.stage("audit").details["coverage"]
    # (cuBLAS may pick another kernel under capture: either way none of the graph's kernels is the candidate's)
    assert coverage["graph_launches"] >= 1 and coverage["custom_kernels"] == [], coverage
    assert v.coverage < 0.05 and (v.status is Status.HACK_DETECTED or "low_coverage" in {f.code for f in v.flags})
