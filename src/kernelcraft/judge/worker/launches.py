"""Counting the candidate's own kernel launches (coverage, docs/judge.md, exploit classes 9 and 10).

Every function of an extension built by `load_inline` and every `@triton.jit` kernel is wrapped
before the candidate is imported (so a reference the candidate keeps is the wrapper too), and the
judge knows how often the candidate's own code ran during the profiled call, and which kernels its
extensions compiled (kernel_names.CompiledKernels). Outside that call a wrapper only passes the call
on: the timed calls, which the reference makes unwrapped, pay one attribute test and no counting.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Callable

import torch

from .kernel_names import CompiledKernels


class LaunchCounter:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.profiling = False  # count, and wrap calls in profiler ranges, only while profiling
        self.kernel_names: set[str] = set()
        self.compiled = CompiledKernels()

    def reset(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        counter = self

        def counted(*args: Any, **kwargs: Any) -> Any:
            if not counter.profiling:
                return fn(*args, **kwargs)
            counter.calls[name] += 1
            with torch.profiler.record_function(f"kernelcraft_custom::{name}"):
                return fn(*args, **kwargs)

        return counted

    def instrument_extension(self, module: Any, functions: list[str] | str | None) -> None:
        """Wrap the functions an extension module exports, and take in the kernels it compiled."""
        if getattr(module, "__file__", None):  # with is_python_module=False, load_inline returns no module
            self.compiled.add_binary(module.__file__)
        if isinstance(functions, str):
            functions = [functions]
        names = functions or [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        for n in names:
            if hasattr(module, n):
                setattr(module, n, self.wrap(f"ext:{n}", getattr(module, n)))
                self.kernel_names.add(n)

    def instrument_triton(self) -> None:
        """Count every Triton launch. Compiled kernels are counted where every launch path ends,
        `CompiledKernel.run` (so a kernel launched through its low-level runner, which skips the
        `kernel[grid]` binding, counts too); interpreted ones (CPU) at the kernel's `run`."""
        import triton
        import triton.runtime.jit as jit_mod

        # Where a Triton has no such property, the kernel's `run` is counted, as under the interpreter.
        at_jit = os.environ.get("TRITON_INTERPRET") == "1" or not self._count_compiled_launches()
        original = triton.jit

        def instrument(kernel: Any) -> Any:
            name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "triton_kernel")
            if at_jit:
                kernel.run = self.wrap(f"triton:{name}", kernel.run)
            self.kernel_names.add(name)
            return kernel

        def jit(fn: Any = None, **kwargs: Any) -> Any:
            if fn is None:
                decorator = original(**kwargs)
                return lambda f: instrument(decorator(f))
            return instrument(original(fn, **kwargs))

        triton.jit = jit
        jit_mod.jit = jit

    def _count_compiled_launches(self) -> bool:
        from triton.compiler.compiler import CompiledKernel

        launcher = CompiledKernel.__dict__.get("run")  # a property: the driver's launch function, loaded on first use
        if not isinstance(launcher, property):
            return False
        counted: dict[int, tuple[Any, Callable[..., Any]]] = {}

        def run(kernel: Any) -> Callable[..., Any]:
            fn = launcher.fget(kernel)
            seen = counted.get(id(kernel))
            if seen is None or seen[0] is not fn:
                seen = counted[id(kernel)] = (fn, self.wrap(f"triton:{kernel.name}", fn))
                self.kernel_names.add(kernel.name)
            return seen[1]

        CompiledKernel.run = property(run)
        return True
