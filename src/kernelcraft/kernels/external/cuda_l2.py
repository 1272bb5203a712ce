"""CUDA-L2's per-shape HGEMM kernels (github.com/deepreinforce-ai/CUDA-L2, MIT): one `M_N_K.cu` per shape, each
defining `void NAME(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c)` that writes
A @ B into c. Their harness makes `b_col_major` (B's column-major copy) before its timer starts; the wrapper
makes any copy the kernel reads in `forward`, so the judge times it as part of the kernel's work (one that reads
only the row-major B gets B itself, no copy). For hgemm-wt, whose B is the K-major weight W, W is the column-major
copy as it is. Compiled with `load_inline` against
CUTLASS's headers (the `cutlass` extra), for Hopper (sm_90a)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from ...tasks.hgemm import HGEMM_SUITE, HGEMM_WT_SUITE, Shape
from ..gemm.cutlass import cutlass_include_dirs
from .imported import ImportedKernel, ImportFailed, KernelSetImport
from ..templates import package_template

REPOSITORY = "https://github.com/deepreinforce-ai/CUDA-L2"
_FILE = re.compile(r"^(\d+)_(\d+)_(\d+)\.cu$")
_ENTRY = re.compile(r"\bvoid\s+([A-Za-z_]\w*)\s*\(\s*torch::Tensor\s+\w+\s*,\s*torch::Tensor\s+(\w+)\s*,"
                    r"\s*torch::Tensor\s+(\w+)\s*,\s*torch::Tensor\s+\w+\s*\)\s*\{")
# A line that only checks a tensor's dtype or shape (CUDA-L2's CHECK_TORCH_TENSOR_* macros) reads none of its data,
# nor does asking a tensor for its metadata.
_CHECK_LINE = re.compile(r"^\s*CHECK_TORCH_TENSOR_\w+\s*\(")
# A macro's definition, its continuation lines joined (an entry point may read a tensor only inside the launch macro
# it invokes).
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(.*)$", re.M)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_METADATA = (r"\s*\.\s*(?:size|sizes|stride|strides|dim|numel|scalar_type|dtype|device|options|is_contiguous|is_cuda)"
             r"\s*\(")
LAYOUTS = {  # by family, then by what the kernel reads: (reads the row-major B, reads the column-major copy)
    HGEMM_SUITE: {(True, True): "B's column-major copy made in forward (timed)",
              (False, True): "B's column-major copy made in forward (timed)",
              (True, False): "B as given (row-major), no copy", (False, False): "B as given (row-major), no copy"},
    HGEMM_WT_SUITE: {(True, True): "W as B's column-major copy; B's row-major copy made in forward (timed)",
                 (True, False): "B's row-major copy made from W in forward (timed)",
                 (False, True): "W as B's column-major copy, no copy", (False, False): "W as B's column-major copy, no copy"},
}
# How a kernel names its accumulator, and which each gives: CuTe MMA atoms, PTX mma instructions, WMMA accumulator
# fragments, CUTLASS's ElementAccumulator (the set is labelled "F32F16F16F32", 32-bit accumulation, yet some of its
# kernels accumulate in 16 bits).
_ACCUMULATORS = (
    (re.compile(r"F16F16F16F16"), "fp16"), (re.compile(r"F32F16F16F32|SM90_64x\w*_F32F16F16"), "fp32"),
    (re.compile(r"mma\.sync\.aligned\.\w+\.row\.col\.f16\.f16\.f16\.f16"), "fp16"),
    (re.compile(r"mma\.sync\.aligned\.\w+\.row\.col\.f32\.f16\.f16\.f32"), "fp32"),
    (re.compile(r"fragment<\s*(?:\w+::)*accumulator\s*,[^>]*\b(?:half|__half)\s*>"), "fp16"),
    (re.compile(r"fragment<\s*(?:\w+::)*accumulator\s*,[^>]*\bfloat\s*>"), "fp32"),
    (re.compile(r"(?:ElementAccumulator|AccumulatorType)\s*=\s*(?:cutlass::half_t|half|__half)\s*;"), "fp16"),
    (re.compile(r"(?:ElementAccumulator|AccumulatorType)\s*=\s*float\s*;"), "fp32"),
)
# Their build's flags (tools/utils.py), for Hopper's sm_90a where CUTLASS's SM90 paths need it.
NVCC_FLAGS = ["-O3", "-std=c++17", "-DNDEBUG", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr",
              "--expt-extended-lambda", "--use_fast_math", "-gencode=arch=compute_90a,code=sm_90a"]


def import_cuda_l2(path: Path, shapes: list[Shape] | None = None, family: str = HGEMM_SUITE) -> KernelSetImport:
    """The kernels under `path` (a folder such as `kernels/h100_F32F16F16F32`), wrapped for `family`'s tasks (hgemm:
    B given row-major; hgemm-wt: B given as the K-major weight W); `shapes`: only these. Raises ImportFailed when the
    folder holds no kernel, a kernel lacks its entry point, or CUTLASS's headers are missing."""
    found = {}
    for f in sorted(path.iterdir()):
        m = _FILE.match(f.name)
        if m and f.is_file():
            found[Shape(int(m[1]), int(m[2]), int(m[3]))] = f
    if not found:
        raise ImportFailed(f"{path}: no CUDA-L2 kernels here (files named M_N_K.cu, as in kernels/h100_F32F16F16F32)")
    include = cutlass_include_dirs()
    if include is None:
        raise ImportFailed("CUDA-L2's kernels build against CUTLASS's headers: pip install 'kernelcraft[cutlass]', "
                           "or set CUTLASS_PATH to a CUTLASS checkout")
    asked = shapes if shapes is not None else list(found)
    result = KernelSetImport(missing=[s for s in asked if s not in found])
    root, provenance = _provenance(path)
    for shape in asked:
        if shape in found:
            result.kernels.append(_wrap(shape, found[shape], include, root, provenance, family))
    return result


def _wrap(shape: Shape, file: Path, include: list[str], root: Path | None, provenance: dict[str, Any],
          family: str) -> ImportedKernel:
    cuda = file.read_text(errors="replace")
    entry = _ENTRY.search(cuda)
    if entry is None:
        raise ImportFailed(f"{file}: no entry point void NAME(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, "
                           "torch::Tensor c) { ... }")
    if '"""' in cuda:
        raise ImportFailed(f"{file}: holds a triple quote, which the wrapper cannot carry")
    relative = str(file.resolve().relative_to(root)) if root else file.name
    body = with_macros(cuda[entry.end():], cuda)
    reads_row, reads_col = reads_data(body, entry[2]), reads_data(body, entry[3])
    origin = {"set": "cuda-l2", "file": relative, **provenance, "accumulator": accumulator(cuda),
              "layout": LAYOUTS[family][(reads_row, reads_col)]}
    source = package_template(__package__, "cuda_l2.py.j2").render(
        family=family, weight=family == HGEMM_WT_SUITE, shape=shape, origin=origin, origin_literal=repr(origin),
        entry=entry[1], cuda_source=cuda, include_dirs=repr(include), nvcc_flags=repr(NVCC_FLAGS),
        module=f"kc_cuda_l2_{shape.m}_{shape.n}_{shape.k}", reads_row=reads_row, reads_col=reads_col)
    return ImportedKernel(shape, file, source, origin, family)


def with_macros(body: str, cuda: str) -> str:
    """`body` followed by the definitions of the macros it uses, and of those their definitions use: where a tensor
    is read only inside the launch macro the entry point invokes (`LAUNCH_..._TN(6, 2048)` reading
    `b_col_major.data_ptr()`), that is its read."""
    joined = re.sub(r"\\\r?\n", " ", cuda)
    macros = {m[1]: m[2] for m in _DEFINE.finditer(joined)}
    parts, todo, seen = [body], [body], set()
    while todo:
        for name in set(_IDENTIFIER.findall(todo.pop())) & macros.keys() - seen:
            seen.add(name)
            parts.append(macros[name])
            todo.append(macros[name])
    return "\n".join(parts)


def reads_data(body: str, name: str) -> bool:
    """Whether the entry point's `body` reads the data of its tensor parameter `name`, beyond dtype and shape checks
    and metadata (sizes, strides); `body` carries the macros it uses (`with_macros`). Some of the 1,000 H100 kernels
    never read the column-major B their harness makes untimed: a copy made for them would be wasted, timed work, so
    their wrapper passes what they check instead."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    metadata = re.compile(rf"\b{re.escape(name)}{_METADATA}")
    return any(word.search(metadata.sub("", line)) for line in body.splitlines() if not _CHECK_LINE.match(line))


def accumulator(cuda: str) -> str:
    """The accumulator a kernel's matrix instructions use, as its source names them ("fp16", "fp32", "fp16 + fp32"
    where it names both), or "not named"."""
    found = {label for pattern, label in _ACCUMULATORS if pattern.search(cuda)}
    return " + ".join(sorted(found)) if found else "not named"


def _provenance(path: Path) -> tuple[Path | None, dict[str, Any]]:
    """The set's top folder, where its LICENSE lies (at `path` or up to three folders above; files are named
    relative to it), and its repository, its license, and the commit of the checkout when that folder is one
    (a git archive of the set has none; a folder inside another project's checkout is not the set's)."""
    top = next((d for d in [path.resolve(), *path.resolve().parents][:4] if any(f.is_file() for f in d.glob("LICENSE*"))), None)
    if top is None:
        return None, {"repository": REPOSITORY, "commit": None, "license": "not found (CUDA-L2 publishes under MIT)"}
    found = sorted(f for f in top.glob("LICENSE*") if f.is_file())[0]
    text = found.read_text(errors="replace")[:2000]
    license_name = "MIT" if "MIT License" in text or "Permission is hereby granted, free of charge" in text else f"see {found.name}"
    commit = None
    if (top / ".git").exists():
        try:
            commit = subprocess.run(["git", "-C", str(top), "rev-parse", "HEAD"], capture_output=True, text=True,
                                    timeout=10).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            commit = None
    return top, {"repository": REPOSITORY, "commit": commit, "license": license_name}
