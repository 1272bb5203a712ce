"""What an import of a kernel set gives: one wrapped candidate per shape, what was skipped and why, and the one
registry of the sets kernelcraft can read."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ...tasks.hgemm import GEMM_FAMILIES, HGEMM_SUITE, Shape


class ImportFailed(ValueError):
    """A kernel set that cannot be read: one line naming the path or file."""


@dataclass(frozen=True)
class ImportedKernel:
    """One kernel of a set, wrapped: its shape, the file it came from, and the candidate's source (a module
    defining ModelNew, with `KERNEL_ORIGIN`: the set, the file, its license, the source's repository)."""

    shape: Shape
    path: Path
    source: str
    origin: dict[str, Any]
    family: str = HGEMM_SUITE  # the task family it is wrapped for: hgemm, or hgemm-wt (B as a K-major weight)

    @property
    def task_key(self) -> str:
        return f"{self.family}/{self.shape}"


@dataclass
class KernelSetImport:
    """A set's kernels for the shapes asked (all of them by default), and the shapes asked that it has no kernel
    for, counted apart."""

    kernels: list[ImportedKernel] = field(default_factory=list)
    missing: list[Shape] = field(default_factory=list)


Importer = Callable[[Path, "list[Shape] | None", str], KernelSetImport]


def kernel_sets() -> dict[str, Importer]:
    """The kernel sets kernelcraft reads, by the name `import-kernels` takes."""
    from .cuda_l2 import import_cuda_l2
    return {"cuda-l2": import_cuda_l2}


def import_kernel_set(name: str, path: Path, shapes: list[Shape] | None = None,
                      family: str = HGEMM_SUITE) -> KernelSetImport:
    """The kernels of the set `name` at `path`, wrapped for `family`'s tasks (hgemm, or hgemm-wt: B as a K-major
    weight), `shapes`: only these. Raises ImportFailed in one line."""
    sets = kernel_sets()
    if name not in sets:
        raise ImportFailed(f"unknown kernel set {name!r}: known are {', '.join(sorted(sets))}")
    if family not in GEMM_FAMILIES:
        raise ImportFailed(f"unknown task family {family!r}: known are {', '.join(GEMM_FAMILIES)}")
    if not path.is_dir():
        raise ImportFailed(f"{path}: no such directory")
    return sets[name](path, shapes, family)


def origin_of(source: str) -> dict[str, Any] | None:
    """The `KERNEL_ORIGIN` a wrapped candidate's source declares (read, never run); None for any other source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KERNEL_ORIGIN" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None
