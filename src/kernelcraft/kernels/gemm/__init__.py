"""GEMM kernels written from templates, with no model: a family of Triton kernels (`triton`) and
one of CUTLASS Hopper kernels (`cutlass`), each with its space of configurations for a shape and a
prior that orders it, and the two spaces as one (`space`), best guess first. The template search
(`search/template.py`) judges them; `render_config` writes a configuration as a complete candidate."""

from .caps import DeviceCaps
from .cutlass import CutlassConfig, cutlass_include_dirs, cutlass_space, render_cutlass
from .render import TemplateError
from .space import KernelConfig, config_from_dict, config_of_source, kernel_space, render_config
from .triton import GemmConfig, config_space

__all__ = [
    "CutlassConfig", "DeviceCaps", "GemmConfig", "KernelConfig", "TemplateError", "config_from_dict", "config_of_source",
    "config_space", "cutlass_include_dirs", "cutlass_space", "kernel_space", "render_config", "render_cutlass",
]
