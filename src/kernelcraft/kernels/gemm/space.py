"""The template search's whole space for one shape: the Triton kernels of `triton` and the
CUTLASS kernels of `cutlass`, one list best guess first, and the way back from a candidate's
source or a saved dict to its configuration."""

from __future__ import annotations

import itertools
from typing import Any

from ...tasks import Shape
from .caps import DeviceCaps
from .cutlass import CutlassConfig, cutlass_space, render_cutlass
from .tiles import RIDGE, intensity
from .triton import GemmConfig, config_space, render

KernelConfig = GemmConfig | CutlassConfig


def kernel_space(shape: Shape, caps: DeviceCaps) -> list[KernelConfig]:
    """Both families' configurations for `shape` on `caps`, taking turns so that a short prefix has
    the best guesses of each: CUTLASS's first where the GEMM is compute-bound (its warp-specialized
    pipelines keep the tensor cores busier than Triton's on Hopper), Triton's first elsewhere (short
    GEMMs, where Triton's C++ launch costs less host time and a CUTLASS build buys little)."""
    triton, cutlass = config_space(shape, caps), cutlass_space(shape, caps)
    lead, follow = (cutlass, triton) if intensity(shape) >= RIDGE else (triton, cutlass)
    turns = itertools.chain.from_iterable(itertools.zip_longest(lead, follow))
    return [c for c in turns if c is not None]


def config_of_source(source: str) -> KernelConfig | None:
    """The configuration a template candidate was rendered from, or None for any other source."""
    return GemmConfig.of_source(source) or CutlassConfig.of_source(source)


def config_from_dict(d: dict[str, Any]) -> KernelConfig:
    """A configuration saved with `to_dict`."""
    return CutlassConfig.from_dict(d) if str(d.get("variant", "")).startswith("cutlass") else GemmConfig.from_dict(d)


def render_config(config: KernelConfig) -> str:
    """The complete candidate source for `config`."""
    return render_cutlass(config) if isinstance(config, CutlassConfig) else render(config)
