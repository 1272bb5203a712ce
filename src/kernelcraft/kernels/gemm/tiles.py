"""The part of the GEMM priors both kernel families share: how well an output tile suits a shape,
and where an fp16 GEMM turns compute-bound."""

from __future__ import annotations

import math

from ...tasks import Shape
from .caps import DeviceCaps

# Flops per byte moved above which an fp16 GEMM is compute-bound on Hopper (about 990 TFLOP/s of
# dense fp16 over 3.35 to 4.8 TB/s of memory bandwidth).
RIDGE = 256


def intensity(shape: Shape) -> float:
    """Flops per byte an fp16 GEMM moves (multiply-adds per element read or written): above RIDGE it is
    compute-bound on Hopper."""
    return shape.m * shape.n * shape.k / (shape.m * shape.k + shape.k * shape.n + shape.m * shape.n)


def tile_fit(block_m: int, block_n: int, shape: Shape, caps: DeviceCaps) -> float:
    """How well an output tile suits a shape, for priors: little work on padding, and tiles large
    enough to reuse what they load (on cuda, as much as the GEMM is compute-bound: reuse saves memory
    traffic)."""
    tiles_m, tiles_n = math.ceil(shape.m / block_m), math.ceil(shape.n / block_n)
    padding = (shape.m * shape.n) / (tiles_m * block_m * tiles_n * block_n)
    reuse = math.sqrt(min(1.0, (block_m * block_n / (block_m + block_n)) / (128 * 256 / 384)))
    if caps.kind == "cuda":
        reuse **= min(1.0, intensity(shape) / RIDGE)
    return padding * reuse
