"""Features of a kernel's source for the evolutionary diversity archive: its language, the
techniques it visibly uses, and its speedup band. Two kernels in one cell compete; kernels in
different cells are both kept."""

from __future__ import annotations

import re

TECHNIQUES = {
    "shared-memory": re.compile(r"__shared__|extern\s+__shared__"),
    "vector-loads": re.compile(r"\b(float4|float2|half2|__half2|int4|uint4|bfloat162)\b"),
    "warp-shuffle": re.compile(r"__shfl(_xor|_down|_up)?_sync"),
    "tensor-cores": re.compile(r"\bwmma::|\bmma\.sync|tl\.dot\b|\bwgmma\b"),
    "async-copy": re.compile(r"cp\.async|__pipeline_memcpy_async|cuda::memcpy_async|num_stages\s*="),
    "atomics": re.compile(r"\batomic(Add|Max|Min|CAS)\b|tl\.atomic_"),
    "fast-math": re.compile(r"__expf|__logf|__fdividef|rsqrtf|__frcp|use_fast_math"),
    "cuda-graphs": re.compile(r"CUDAGraph|cudaGraph"),
    "reductions": re.compile(r"tl\.(sum|max|min|reduce)\b|__syncthreads\(\)\s*;[^}]*\+="),
    "autotune": re.compile(r"@triton\.autotune"),
}
SPEEDUP_BANDS = (1.0, 1.5, 3.0)  # below 1x, 1-1.5x, 1.5-3x, 3x and more


def language_of(source: str) -> str:
    return "triton" if "@triton.jit" in source else "cuda"


def techniques_of(source: str) -> tuple[str, ...]:
    return tuple(sorted(name for name, pattern in TECHNIQUES.items() if pattern.search(source)))


def speedup_band(speedup: float | None) -> int:
    """0 for an incorrect kernel, then 1 + the number of band edges the speedup reaches."""
    if speedup is None:
        return 0
    return 1 + sum(speedup >= edge for edge in SPEEDUP_BANDS)


def archive_cell(source: str, speedup: float | None) -> tuple[str, tuple[str, ...], int]:
    return language_of(source), techniques_of(source), speedup_band(speedup)
