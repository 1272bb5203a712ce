"""Runtime guards inside the worker: monkeypatching, threads, precision flags (judge-hardening #2, #4, #11).

Snapshots are taken before the candidate is imported; checks run after import and after calls.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import types
from typing import Any

import torch
import torch.nn.functional as F


def _watched_namespaces() -> list[tuple[str, Any]]:
    spaces: list[tuple[str, Any]] = [
        ("torch", torch), ("torch.nn.functional", F), ("torch.Tensor", torch.Tensor),
        ("torch.nn.Module", torch.nn.Module), ("torch.linalg", torch.linalg), ("torch.fft", torch.fft),
        ("torch.special", torch.special), ("torch.testing", torch.testing), ("time", time),
        ("torch.profiler", torch.profiler), ("torch.autograd.profiler", torch.autograd.profiler),
    ]
    if torch.cuda.is_available():
        spaces += [("torch.cuda", torch.cuda), ("torch.cuda.Event", torch.cuda.Event)]
    return spaces


class Guard:
    """Identity snapshot of the functions the judge and the reference rely on."""

    def __init__(self, extra_classes: list[type] = ()) -> None:
        self.spaces = _watched_namespaces() + [(f"{c.__module__}.{c.__qualname__}", c) for c in extra_classes]
        self.snapshot = {name: dict(vars(ns)) for name, ns in self.spaces}
        self.flags = precision_flags()
        self.modes = mode_stacks()
        self.interpreter = interpreter_state()

    def changed(self) -> list[str]:
        """Names whose binding changed since the snapshot (replaced, added or removed)."""
        out = []
        for name, ns in self.spaces:
            now = vars(ns)
            before = self.snapshot[name]
            if now.keys() != before.keys():
                # torch binds submodules as they are first imported: not a patch.
                added = sorted(k for k in set(now) - set(before)
                               if not isinstance(now[k], types.ModuleType) and k not in _PYTHON_CACHES)[:3]
                removed = sorted(set(before) - set(now))[:3]
                out += [f"{name}.{k} added" for k in added] + [f"{name}.{k} removed" for k in removed]
            for k, v in before.items():
                if k in now and now[k] is not v and not _benign(k, v, now[k]):
                    out.append(f"{name}.{k} replaced")
        if mode_stacks() != self.modes:
            out.append(f"a torch function or dispatch mode was left active (stack depths {self.modes} -> {mode_stacks()})")
        if precision_flags() != self.flags:
            out.append(f"precision flags changed: {self.flags} -> {precision_flags()}")
        now = interpreter_state()
        out += [f"interpreter state changed: {k} {self.interpreter[k]} -> {now[k]}" for k in now if now[k] != self.interpreter[k]]
        return out


_PYTHON_CACHES = {"__slotnames__"}  # copyreg caches this on a class the first time it pickles one


def _benign(name: str, before: Any, after: Any) -> bool:
    # Lazily created submodules and caches that torch itself fills in on first use.
    return isinstance(before, types.ModuleType) and isinstance(after, types.ModuleType) and before.__name__ == after.__name__ \
        or name.startswith("_") and not callable(before)


def mode_stacks() -> tuple[int, int]:
    """Depths of the TorchFunctionMode and TorchDispatchMode stacks: a mode left active intercepts
    every later torch call, the reference's included, without replacing any function."""
    return torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()


def interpreter_state() -> dict[str, Any]:
    """What slows every Python call of the process, the reference's and the judge's host probe alike,
    without replacing a function: trace and profile hooks, monitoring tools (3.12+), the garbage
    collector's settings, torch's thread count."""
    tools = [sys.monitoring.get_tool(i) for i in range(6)] if hasattr(sys, "monitoring") else []
    return {"trace": sys.gettrace() is not None, "profile": sys.getprofile() is not None, "monitoring": tools,
            "gc": (gc.isenabled(), gc.get_threshold()), "switch_interval": sys.getswitchinterval(),
            "torch_threads": (torch.get_num_threads(), torch.get_num_interop_threads())}


def precision_flags() -> tuple:
    m = torch.backends.cuda.matmul
    return (
        m.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
        m.allow_fp16_reduced_precision_reduction,
        m.allow_bf16_reduced_precision_reduction,
    )


def pin_precision(allow_tf32: bool) -> None:
    """The judge, not the candidate, decides whether fp32 matmuls and convolutions may use TF32."""
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")


class ThreadWatch:
    """Python threads alive after a call that were not there before are work escaping the timer."""

    def __init__(self) -> None:
        self.before: set[int] = set()
        self.native_before = native_threads()

    def arm(self) -> None:
        self.before = {t.ident for t in threading.enumerate()}
        self.native_before = native_threads()

    def new_python_threads(self) -> list[str]:
        return [t.name for t in threading.enumerate() if t.ident not in self.before and t.is_alive()]


def native_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()
