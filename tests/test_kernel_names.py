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

from kernelcraft.judge.worker.coverage import device_share
from kernelcraft.judge.worker.kernel_names import CompiledKernels

# As nvcc registers a CUTLASS-style kernel the candidate instantiates, and a template name longer than the
# profiler demangles (kineto passes names over 1024 characters on mangled).
CUTLASS_STYLE = "_ZN7cutlass13device_kernelINS_4gemm2OpIfLi3EEEEEvPfT_"
LONG = "_Z11long_kernelISt16integer_sequenceIiJ" + "".join(f"Li{i}E" for i in range(300)) + "EEEvPfT_"
# cuBLAS's kernel of the same family, with other template arguments: not in the candidate's binary.
CUBLAS_STYLE = "void cutlass::device_kernel<cutlass::gemm::Op<float, 4> >(float*, cutlass::gemm::Op<float, 4>)"
# A kernel of internal linkage (CUTLASS 4 declares its device_kernel `static`): its launch stub is mangled with an
# `L` before its name ('_ZN7cutlassL13static_kernel...'), the name the profiler gives has none (as a CUDA-L2
# GemmUniversal kernel showed on an H200).
STATIC_STYLE = "_ZN7cutlass13static_kernelINS_4gemm2OpIfLi3EEEEEvPfT_"


# g++ mangles as nvcc's host side does: the launch stub of a kernel is a function of the kernel's own name.
SOURCE = """
#include <utility>
namespace cutlass { namespace gemm { template <class T, int N> struct Op { T scale; }; }
template <class Op> void device_kernel(float* x, Op op) { x[0] *= op.scale; }
template <class Op> static void static_kernel(float* x, Op op) { x[0] -= op.scale; } }
namespace kc { void ns_kernel(float* x) { x[0] += 2; } }
template <class S> void long_kernel(float* x, S) { x[0] += 1; }
// A library kernel's mangled name planted as a string (adjacent literals, as one) is no symbol.
extern const char* planted;
const char* planted = "_ZN7cutlass13device_kernelINS_4gemm2OpIfLi4EEEEEvPfT_" "";
void run(float* x) {
  cutlass::device_kernel(x, cutlass::gemm::Op<float, 3>{2.f});
  cutlass::static_kernel(x, cutlass::gemm::Op<float, 3>{2.f});
  kc::ns_kernel(x);
  long_kernel(x, std::make_integer_sequence<int, 300>{});
}
"""


@pytest.fixture(scope="module")
def shared_object(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real shared object, built by the C++ compiler the CPU candidates use."""
    where = tmp_path_factory.mktemp("so")
    (where / "k.cpp").write_text(SOURCE)
    subprocess.run(["g++", "-shared", "-fPIC", "-O0", "-o", str(where / "k.so"), str(where / "k.cpp")], check=True,
                   capture_output=True, timeout=300)
    return where / "k.so"


def test_a_kernel_is_known_by_its_mangled_name_or_its_demangled_one(shared_object: Path) -> None:
    compiled = CompiledKernels()
    compiled.add_binary(shared_object)
    demangled = torch._C._demangle(CUTLASS_STYLE)
    assert demangled.startswith("void cutlass::device_kernel<cutlass::gemm::Op<float, 3>")
    assert compiled.holds(demangled) and compiled.holds(CUTLASS_STYLE) and compiled.holds(LONG)
    assert compiled.holds(torch._C._demangle("_ZN2kc9ns_kernelEPf"))
    assert compiled.holds(STATIC_STYLE) and compiled.holds(torch._C._demangle(STATIC_STYLE))
    assert not compiled.holds(CUBLAS_STYLE), "a planted string counted as a compiled kernel"
    assert not compiled.holds("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT")


def test_an_internal_linkage_kernel_whose_name_does_not_demangle_is_known_by_its_mangled_name(tmp_path: Path) -> None:
    """As a CUTLASS GemmUniversal's 1,176-character name on an H200: the stub's symbol carries the `L`, the
    profiler's name does not, and neither demangles. The symbols are set by asm labels."""
    stub, profiled = "_ZN7cutlassL13device_kernelI9not_validQQEEvT_", "_ZN7cutlass13device_kernelI9not_validQQEEvT_"
    other = "_ZN7cutlass13device_kernelI9not_validRREEvT_"  # the same family, other arguments: not in the binary
    assert torch._C._demangle(stub) == stub and torch._C._demangle(profiled) == profiled  # no demangling helps
    (tmp_path / "k.cpp").write_text(f'extern "C" void stub() __asm__("{stub}");\nextern "C" void stub() {{}}\n')
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(tmp_path / "k.so"), str(tmp_path / "k.cpp")], check=True,
                   capture_output=True, timeout=300)
    compiled = CompiledKernels()
    compiled.add_binary(tmp_path / "k.so")
    assert compiled.holds(profiled) and compiled.holds(stub)
    assert not compiled.holds(other)


def test_a_file_that_is_no_shared_object_holds_no_kernel(tmp_path: Path) -> None:
    (tmp_path / "x.so").write_bytes(b"\x00" + CUTLASS_STYLE.encode() + b"\x00")
    compiled = CompiledKernels()
    compiled.add_binary(tmp_path / "x.so")
    assert not compiled.holds(CUTLASS_STYLE)


def _event(id_: int, name: str, device: DeviceType, us: float = 0.0, parent: Any = None, note: bool = False) -> Any:
    return SimpleNamespace(id=id_, name=name, device_type=device, time_range=SimpleNamespace(start=0.0, end=us),
                           cpu_parent=parent, is_user_annotation=note)


def test_a_template_the_candidate_instantiates_is_its_own_where_its_code_launches_it(shared_object: Path) -> None:
    """Events shaped as the profiler gives them (test_judge_cpu's decoy test): the candidate's extension
    function launches its CUTLASS-style kernel and calls cuBLAS itself; aten::mm launches the same kernel."""
    compiled = CompiledKernels()
    compiled.add_binary(shared_object)
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
def test_nvcc_gives_every_kernel_it_compiles_a_function_symbol_of_its_mangled_name(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text(
        "namespace cutlass { namespace gemm { template <class T, int N> struct Op { T scale; }; }\n"
        "template <class Op> __global__ void device_kernel(float* x, Op op) { x[threadIdx.x] *= op.scale; }\n"
        "template <class Op> static __global__ void static_kernel(float* x, Op op) { x[threadIdx.x] -= op.scale; } }\n"
        "namespace kc { __global__ void ns_kernel(float* x) { x[threadIdx.x] += 2; } }\n"
        "void run(float* x) {\n"
        "  cutlass::device_kernel<<<1, 32>>>(x, cutlass::gemm::Op<float, 3>{2.f});\n"
        "  cutlass::static_kernel<<<1, 32>>>(x, cutlass::gemm::Op<float, 3>{2.f});\n"
        "  kc::ns_kernel<<<1, 32>>>(x);\n}\n")
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", str(tmp_path / "k.so"), str(source)], check=True,
                   capture_output=True, timeout=300)
    compiled = CompiledKernels()
    compiled.add_binary(tmp_path / "k.so")
    assert compiled.holds(torch._C._demangle(CUTLASS_STYLE)) and compiled.holds("kc::ns_kernel(float*)")
    assert compiled.holds(STATIC_STYLE), "a static kernel's name as the profiler gives it"
    assert not compiled.holds(CUBLAS_STYLE)
