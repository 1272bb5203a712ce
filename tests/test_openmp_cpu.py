"""OpenMP and at::parallel_for in C++ candidates on the CPU: allowed at the reference's thread count
(cpu_threads), caught when a candidate takes more threads than that.

Every candidate here shares one extension (same name, source and flags: built once, then cached)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from kernelcraft.judge import Judge, Status
from kernelcraft.tasks import resolve_task

from .conftest import FAST

CANDIDATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <omp.h>
#include <algorithm>

static void relu_range(const float* in, float* out, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = std::max(in[i], 0.f);
}

// ReLU: the first half in an OpenMP loop, the rest with at::parallel_for.
torch::Tensor relu_parallel(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel(), half = n / 2;
    #pragma omp parallel for
    for (int64_t i = 0; i < half; ++i) relu_range(in, o, i, i + 1);
    at::parallel_for(half, n, 4096, [&](int64_t begin, int64_t end) { relu_range(in, o, begin, end); });
    return out;
}

// The same on `threads` threads, whatever the judge's count.
torch::Tensor relu_wide(torch::Tensor x, int64_t threads) {
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for num_threads(threads)
    for (int64_t i = 0; i < n; ++i) relu_range(in, o, i, i + 1);
    return out;
}

void set_omp_threads(int64_t threads) { omp_set_num_threads(static_cast<int>(threads)); }
"""

_ext = load_inline(
    name="kc_test_openmp",
    cpp_sources=[_CPP],
    functions=["relu_parallel", "relu_wide", "set_omp_threads"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        FORWARD
'''
HONEST = "return _ext.relu_parallel(x)"


def candidate(forward: str) -> str:
    return CANDIDATE.replace("FORWARD", forward)


@pytest.fixture(scope="module")
def relu_task():
    return resolve_task(Path(__file__).parent / "redteam" / "tasks" / "relu.py").with_sizes("cpu", {"BATCH": 256, "DIM": 1024})


@pytest.fixture(scope="module")
def two_thread_judge(cache_dir: Path) -> Iterator[Judge]:
    judge = Judge("cpu", cache_dir=cache_dir, config=FAST.with_overrides({"cpu_threads": 2}))
    yield judge
    judge.close()


@pytest.mark.slow
def test_openmp_and_parallel_for_are_correct_at_one_thread(cpu_judge: Judge, relu_task) -> None:
    v = cpu_judge.evaluate(relu_task, candidate(HONEST))
    assert v.status is Status.CORRECT, v.message
    assert not v.has_flag("native_threads")


@pytest.mark.slow
def test_an_openmp_pool_of_cpu_threads_is_honest(two_thread_judge: Judge, relu_task) -> None:
    v = two_thread_judge.evaluate(relu_task, candidate(HONEST))
    assert v.status is Status.CORRECT, v.message
    assert not v.has_flag("native_threads")


@pytest.mark.slow
@pytest.mark.parametrize("forward, words", [
    ("return _ext.relu_wide(x, 8)", "new native thread(s) outlived the call"),
    ("out = _ext.relu_parallel(x)\n        _ext.set_omp_threads(8)\n        return out", "is set to 8 threads"),
])
def test_more_threads_than_cpu_threads_are_caught(cpu_judge: Judge, relu_task, forward: str, words: str) -> None:
    v = cpu_judge.evaluate(relu_task, candidate(forward))
    assert v.status is Status.HACK_DETECTED, v.message
    assert words in v.message and "cpu_threads" in v.message
