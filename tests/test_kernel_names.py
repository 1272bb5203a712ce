"""A kernel the candidate's source compiles counts as its own whatever its namespace: a CUTLASS or CuTe
template it instantiates is in its extension's binary under its mangled name, which the profiler reports
demangled (or as it is, when too long), while a library's precompiled kernel is not there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.autograd import DeviceType

from kernelcraft.judge.coverage import device_share
from kernelcraft.judge.kernel_names import CompiledKernels

# As nvcc registers a CUTLASS-style kernel the candidate instantiates, and a template name longer than the
# profiler demangles (kineto passes names over 1024 characters on mangled).
CUTLASS_STYLE = "_ZN7cutlass13device_kernelINS_4gemm2OpIfLi3EEEEEvPfT_"
LONG = "_Z11long_kernelISt16integer_sequenceIiJ" + "".join(f"Li{i}E" for i in range(300)) + "EEEvPfT_"
# cuBLAS's kernel of the same family, with other template arguments: not in the candidate's binary.
CUBLAS_STYLE = "void cutlass::device_kernel<cutlass::gemm::Op<float, 4> >(float*, cutlass::gemm::Op<float, 4>)"


def binary(tmp_path: Path, *names: str) -> Path:
    """A file laid out as a shared object keeps its strings: NUL-terminated, among other bytes."""
    path = tmp_path / "ext.so"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + b"".join(b"\x00" + n.encode() + b"\x00\x13" for n in names)
                     + b"__x_Z3notPf\x00")  # the tail of a longer identifier is no name of its own
    return path


def test_a_kernel_is_known_by_its_mangled_name_or_its_demangled_one(tmp_path: Path) -> None:
    compiled = CompiledKernels()
    compiled.add_binary(binary(tmp_path, CUTLASS_STYLE, LONG, "_ZN2kc9ns_kernelEPf"))
    demangled = torch._C._demangle(CUTLASS_STYLE)
    assert demangled.startswith("void cutlass::device_kernel<cutlass::gemm::Op<float, 3>")
    assert compiled.holds(demangled) and compiled.holds(CUTLASS_STYLE) and compiled.holds(LONG)
    assert compiled.holds(torch._C._demangle("_ZN2kc9ns_kernelEPf"))
    assert not compiled.holds(CUBLAS_STYLE) and not compiled.holds("_Z3notPf")
    assert not compiled.holds("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT")


def _event(id_: int, name: str, device: DeviceType, us: float = 0.0, parent: Any = None, note: bool = False) -> Any:
    return SimpleNamespace(id=id_, name=name, device_type=device, time_range=SimpleNamespace(start=0.0, end=us),
                           cpu_parent=parent, is_user_annotation=note)


def test_a_template_the_candidate_instantiates_is_its_own_where_its_code_launches_it(tmp_path: Path) -> None:
    """Events shaped as the profiler gives them (test_judge_cpu's decoy test): the candidate's extension
    function launches its CUTLASS-style kernel and calls cuBLAS itself; aten::mm launches the same kernel."""
    compiled = CompiledKernels()
    compiled.add_binary(binary(tmp_path, CUTLASS_STYLE))
    ours = torch._C._demangle(CUTLASS_STYLE)
    forward = _event(1, "kernelcraft_forward", DeviceType.CPU, note=True)
    own = _event(2, "kernelcraft_custom::ext:gemm", DeviceType.CPU, parent=forward, note=True)
    mm = _event(3, "aten::mm", DeviceType.CPU, parent=forward)
    events = [
        forward, own, mm,
        _event(10, "cuLaunchKernelEx", DeviceType.CPU, parent=own),
        _event(10, ours, DeviceType.CUDA, us=600.0),  # its own template instance, its own launch
        _event(11, "cuLaunchKernel", DeviceType.CPU, parent=own),
        _event(11, CUBLAS_STYLE, DeviceType.CUDA, us=300.0),  # cuBLAS called from its own C++: the library's
        _event(12, "cuLaunchKernelEx", DeviceType.CPU, parent=mm),
        _event(12, ours, DeviceType.CUDA, us=100.0),  # the same kernel launched inside a PyTorch operator
    ]
    share = device_share(events, set(), compiled)
    assert share.coverage == pytest.approx(0.6) and share.custom_kernels == ["device_kernel"]
    # without the binary it is a library's name in a library's namespace, as before
    assert device_share(events, {"device_kernel"}, CompiledKernels()).coverage == 0.0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (it compiles without a GPU)")
def test_nvcc_puts_every_kernel_it_compiles_in_the_binary_by_its_mangled_name(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text(
        "namespace cutlass { namespace gemm { template <class T, int N> struct Op { T scale; }; }\n"
        "template <class Op> __global__ void device_kernel(float* x, Op op) { x[threadIdx.x] *= op.scale; } }\n"
        "namespace kc { __global__ void ns_kernel(float* x) { x[threadIdx.x] += 2; } }\n"
        "void run(float* x) {\n"
        "  cutlass::device_kernel<<<1, 32>>>(x, cutlass::gemm::Op<float, 3>{2.f});\n"
        "  kc::ns_kernel<<<1, 32>>>(x);\n}\n")
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", str(tmp_path / "k.so"), str(source)], check=True,
                   capture_output=True, timeout=300)
    compiled = CompiledKernels()
    compiled.add_binary(tmp_path / "k.so")
    assert compiled.holds(torch._C._demangle(CUTLASS_STYLE)) and compiled.holds("kc::ns_kernel(float*)")
    assert not compiled.holds(CUBLAS_STYLE)
