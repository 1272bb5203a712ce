"""Execute a task inside a judge worker: module, inputs and models at a given size, seed and dtype.

Runs in the sandboxed worker process, so it imports only the standard library and torch.
"""

from __future__ import annotations

import types
from typing import Any

import torch

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


def exec_module(source: str, filename: str, name: str, overrides: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute `source` as a fresh module named `name`; then apply size overrides to its globals."""
    module = types.ModuleType(name)
    module.__file__ = filename
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)  # noqa: S102 - the judge executes task and candidate code by design
    for key, value in (overrides or {}).items():
        if key not in module.__dict__:
            raise KeyError(f"size override {key!r} is not a module-level name of the task")
        module.__dict__[key] = value
    return module


def _place(x: Any, device: torch.device, dtype: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor):
        # Only floating-point inputs take the task dtype: integer targets and indices stay as they are.
        return x.to(device=device, dtype=dtype if x.is_floating_point() else x.dtype)
    return x


def make_inputs(module: types.ModuleType, seed: int, device: torch.device, dtype: torch.dtype,
                binary_p: float | None = None) -> list[Any]:
    """The task's `get_inputs()` under `seed`, made on `device` (its tensor factories default
    there; generating a GB of inputs on the CPU takes seconds), floats cast to `dtype`. With
    `binary_p`, every floating input is replaced by 0s and 1s (1 with probability `binary_p`)."""
    torch.manual_seed(seed)
    with device:
        made = module.get_inputs()
    placed = [_place(x, device, dtype) for x in made]
    if binary_p is None:
        return placed
    gen = torch.Generator(device=device).manual_seed(seed)
    return [(torch.rand(x.shape, generator=gen, device=device) < binary_p).to(x.dtype)
            if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in placed]


def make_init_inputs(module: types.ModuleType) -> list[Any]:
    return list(module.get_init_inputs())


def build_model(cls: type, init_inputs: list[Any], seed: int, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    """Construct `cls(*init_inputs)` under `seed`, in eval mode, on `device` in `dtype`."""
    torch.manual_seed(seed)
    model = cls(*init_inputs)
    return model.to(device=device, dtype=dtype).eval()


def copy_matching_weights(src: torch.nn.Module, dst: torch.nn.Module) -> bool:
    """Copy `src`'s parameters and buffers into `dst` when their names and shapes all match."""
    a, b = src.state_dict(), dst.state_dict()
    if not a or a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        return False
    dst.load_state_dict(a)
    return True
