"""A kernel the candidate's source compiles counts as its own whatever its namespace: a CUTLASS or CuTe
template it instantiates is in its extension's binary under its mangled name, which the profiler reports
demangled (or as it is, when too long), while a library's precompiled kernel is not there. And a kernel it
defines is its own by name in every C++ form (issue 45: one in `namespace { }` was not): the names are parsed,
not split, on both sides (the profiler's, and the static check's from the source)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.autograd import DeviceType

from kernelcraft.judge.protocol import KernelTime
from kernelcraft.judge.static import KERNEL_NAME_RE, check_source
from kernelcraft.judge.worker.coverage import NOT_COMPILED, device_share, is_custom_kernel
from kernelcraft.judge.worker.cxx_names import ANONYMOUS, canonical_mangled, kernel_label, parse_function_name
from kernelcraft.judge.worker.kernel_names import CompiledKernels, function_symbols, kernel_identifier

from .conftest import CORPUS
from .kernel_forms import FORMS, KINETO_MAX, KernelForm, cuda_source, host_source, profiler_name

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
    # each kernel that ran, and whose the judge counted it (a coverage message names them)
    assert share.kernels == [KernelTime(ours, 600.0, 0.6, True), KernelTime(CUBLAS_STYLE, 300.0, 0.3, False, NOT_COMPILED),
                             KernelTime(ours, 100.0, 0.1, False, "launched inside aten::mm")]
    # without the binary it is a library's name in a library's namespace, as before
    bare = device_share(events, {"device_kernel"}, CompiledKernels())
    assert bare.coverage == 0.0 and bare.kernels[0].why_not == "in a library's namespace (cutlass::)"


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


# -- every C++ form of a kernel (tests/kernel_forms.py), on both sides ---------------------------------------------

@pytest.fixture(scope="module")
def host_analogue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The table's host analogues in one shared object, built by g++ (one call for the whole table)."""
    where = tmp_path_factory.mktemp("forms")
    (where / "forms.cpp").write_text(host_source())
    subprocess.run(["g++", "-shared", "-fPIC", "-O0", "-o", str(where / "forms.so"), str(where / "forms.cpp")], check=True,
                   capture_output=True, timeout=300)
    return where / "forms.so"


def _static_names(declaration: str) -> set[str]:
    """The kernel names the static check collects from a candidate whose native source is `declaration`."""
    return check_source(f"SOURCE = {declaration!r}\n\nclass ModelNew:\n    pass\n", enforce=False).kernel_names


def test_the_table_is_what_gxx_and_the_profilers_demangler_make_of_each_form(host_analogue: Path) -> None:
    symbols = function_symbols(host_analogue.read_bytes())
    for form in FORMS:
        assert form.mangled in symbols, form.form
        assert profiler_name(form.mangled) == form.profiled, form.form
    assert len(FORMS[-2].mangled) > KINETO_MAX  # one name the profiler passes on mangled


@pytest.mark.parametrize("form", FORMS, ids=[f.form for f in FORMS])
def test_every_form_of_a_kernel_is_the_candidates_own_by_name_and_through_its_binary(form: KernelForm,
                                                                                     host_analogue: Path) -> None:
    names = _static_names(form.declaration)
    assert names == {kernel_identifier(form.profiled)[1]}, names
    for profiled in (form.profiled, form.mangled):
        assert is_custom_kernel(profiled, names, CompiledKernels()) == form.by_name, profiled[:120]
        assert not is_custom_kernel(profiled, set(), CompiledKernels())  # the name decides, not the form
    compiled = CompiledKernels()
    compiled.add_binary(host_analogue)
    assert compiled.holds(form.profiled) and compiled.holds(form.mangled)


def test_a_binary_holds_only_the_kernels_compiled_into_it(host_analogue: Path) -> None:
    """The same function name in another scope, or another instance of the same template, is another kernel."""
    compiled = CompiledKernels()
    compiled.add_binary(host_analogue)
    for other in ("(anonymous namespace)::kc_plain(float*)", "kc_anon(float*)", "kc::kc_anon(float*)",
                  "void kc_tmpl<double>(double*)", "void (anonymous namespace)::kc_anon_tmpl<8>(float*)",
                  "void kc_fn_arg<&(kc_cube(float))>(float*)", "kc_extern_c(float*)", "kc_other_c",
                  FORMS[-2].mangled.replace("Li299E", "Li300E"), "_ZN2kc12_GLOBAL__N_19kc_plainEPf"):
        assert not compiled.holds(other), other


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (it compiles without a GPU)")
def test_the_device_names_nvcc_gives_every_form_are_its_own(tmp_path: Path, host_analogue: Path) -> None:
    """The names the profiler reports are the device functions' in the cubin: nvcc names an anonymous namespace
    after a hash of the file and drops a static kernel's `L`. Each form's is held by the extension nvcc built, by
    g++'s host analogue too (another compiler's naming of the same declarations), and is its own by name."""
    (tmp_path / "forms.cu").write_text(cuda_source())
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_80", "--keep", "--keep-dir", str(tmp_path),
                    "-o", str(tmp_path / "forms.so"), str(tmp_path / "forms.cu")], check=True, capture_output=True, timeout=300)
    device = function_symbols((tmp_path / "forms.sm_80.cubin").read_bytes())
    assert len(device) == len(FORMS), sorted(device)
    built, gxx = CompiledKernels(), CompiledKernels()
    built.add_binary(tmp_path / "forms.so")
    gxx.add_binary(host_analogue)
    for form in FORMS:
        names = _static_names(form.declaration)
        [name] = [d for d in device if d in names or any(f"{len(n)}{n}" in d for n in names)]  # its source name
        profiled = profiler_name(name)
        assert profiled == form.profiled or len(name) > KINETO_MAX, (form.form, profiled)
        assert built.holds(profiled) and gxx.holds(profiled), (form.form, profiled[:120])
        assert is_custom_kernel(profiled, names, CompiledKernels()) == form.by_name


@pytest.mark.parametrize(("name", "scopes", "function", "label"), [
    ("(anonymous namespace)::gemm_tf32_clamp_lse_kernel(float const*, float const*, float const*, float2*, int, int, int, "
     "float)", (ANONYMOUS,), "gemm_tf32_clamp_lse_kernel", "(anonymous namespace)::gemm_tf32_clamp_lse_kernel"),
    ("void (anonymous namespace)::conv<128, (Mode)1>(float*)", (ANONYMOUS,), "conv", "(anonymous namespace)::conv<128, (Mode)1>"),
    ("<unnamed>::conv3x3_fused_kernel(float const *, float *)", (ANONYMOUS,), "conv3x3_fused_kernel",
     "(anonymous namespace)::conv3x3_fused_kernel"),  # as NVIDIA's tools print it
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::AbsFunctor<float> >("
     "at::TensorIteratorBase&, at::native::AbsFunctor<float> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<"
     "at::native::AbsFunctor<float> >(at::TensorIteratorBase&, at::native::AbsFunctor<float> const&)::{lambda(int)#1})",
     ("at", "native"), "elementwise_kernel", "at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native..."),
    ("void k<(2>1), &(sq(float))>(float*)", (), "k", "k<(2>1), &(sq(float))>"),
    ("void ns::k[abi:cxx11]<int>(int) const", ("ns",), "k", "ns::k<int>"),
    ("k(float*) [clone .cold]", (), "k", "k"),
    ("triton_poi_fused_add_0", (), "triton_poi_fused_add_0", "triton_poi_fused_add_0"),
    ("_ZN36_GLOBAL__N__6821641b_4_k_cu_2072cc047kc_anonEPf", (ANONYMOUS,), "kc_anon", "(anonymous namespace)::kc_anon"),
    ("_ZN3ns112_GLOBAL__N_1L1hEPf", ("ns1", ANONYMOUS), "h", "ns1::(anonymous namespace)::h"),
], ids=["anonymous", "anonymous template", "EDG's anonymous", "lambda argument", "paren arguments", "abi tag", "clone",
        "triton", "nvcc's anonymous mangled", "static in anonymous in a digit-ending namespace"])
def test_a_demangled_or_mangled_name_is_parsed_into_its_scopes_and_function(name: str, scopes: tuple[str, ...], function: str,
                                                                            label: str) -> None:
    parsed = parse_function_name(name)
    assert parsed is not None and (parsed.scopes, parsed.function) == (scopes, function)
    assert kernel_label(name) == label


@pytest.mark.parametrize("name", ["Memcpy DtoD (Device -> Device)", "Memset (Device)", "(anonymous namespace)",
                                  "void k<int(float*)", "k(float*) junk", "", "_Z"])
def test_what_is_no_function_name_is_no_kernel_of_the_candidates(name: str) -> None:
    assert parse_function_name(name) is None and kernel_identifier(name) == ("", name)
    assert not is_custom_kernel(name, {"Memcpy", "DtoD", "Memset", "k", "anonymous"}, CompiledKernels())


def test_mangled_names_compare_across_the_names_of_anonymous_namespaces_and_internal_linkage() -> None:
    nvcc = "_ZN2kc36_GLOBAL__N__6821641b_4_k_cu_2072cc04L13kc_anon_in_nsEPf"  # a digit-ending name before it: `kc1`
    assert canonical_mangled(nvcc) == canonical_mangled("_ZN2kc12_GLOBAL__N_113kc_anon_in_nsEPf")
    assert canonical_mangled("_ZN3kc112_GLOBAL__N_11hEPf") == "_ZN3kc112_GLOBAL__N_11hEPf"
    assert canonical_mangled("_ZN3kc136_GLOBAL__N__6821641b_4_k_cu_2072cc041hEPf") == "_ZN3kc112_GLOBAL__N_11hEPf"
    assert canonical_mangled("_ZN2kc12_GLOBAL__N_11hEPf") != canonical_mangled("_ZN2kc12_GLOBAL__N_11gEPf")


def test_a_static_check_collects_a_kernel_whatever_stands_before_its_name() -> None:
    source = """
    template <int BM, int MINB> __global__ void __launch_bounds__(BM * 32, MINB) conv3x3_relu_f16_kernel(const __half* X) {}
    __global__ __launch_bounds__(std::max(64, KC_THREADS(2))) void nested_bounds(float* x) {}
    extern "C" __global__ void __launch_bounds__(128) __maxnreg__(64) c_kernel(float* x) {}
    __global__ static __forceinline__ void spec_kernel(float* x) {}
    __global__ void ::global_scope(float* x) {}
    __global__ void [[maybe_unused]] attributed(float* x) {}
    __global__ void
    __launch_bounds__(256)
    split_lines(float* x) {}
    __device__ void not_a_kernel(float* x) {}
    """
    assert set(KERNEL_NAME_RE.findall(source)) == {"conv3x3_relu_f16_kernel", "nested_bounds", "c_kernel", "spec_kernel",
                                                  "global_scope", "attributed", "split_lines"}


def test_an_anonymous_namespace_kernel_its_own_code_launched_is_its_coverage() -> None:
    """Issue 45, as an H200 profiled level2/22's first turn: its two kernels, in `namespace { }`, launched by its
    extension function. The judge had found coverage 0% and rejected it (hack_detected)."""
    from kernelcraft.judge import JudgeConfig
    from kernelcraft.judge.rules import CoverageRuling, rule_on_coverage

    names = _static_names("namespace {\n__global__ void __launch_bounds__(NTHREADS, 1)\ngemm_tf32_clamp_lse_kernel("
                          "const float* __restrict__ X, float2* __restrict__ part) {}\n__global__ void lse_merge_mish_kernel("
                          "const float2* __restrict__ part, float* __restrict__ out, int M, int NB) {}\n}  // namespace\n")
    forward = _event(1, "kernelcraft_forward", DeviceType.CPU, note=True)
    own = _event(2, "kernelcraft_custom::ext:fused_forward", DeviceType.CPU, parent=forward, note=True)
    events = [forward, own, _event(10, "cudaLaunchKernel", DeviceType.CPU, parent=own),
              _event(10, "(anonymous namespace)::gemm_tf32_clamp_lse_kernel(float const*, float2*)", DeviceType.CUDA, us=97.0),
              _event(11, "cudaLaunchKernel", DeviceType.CPU, parent=own),
              _event(11, "(anonymous namespace)::lse_merge_mish_kernel(float2 const*, float*, int, int)", DeviceType.CUDA, us=3.0)]
    share = device_share(events, names, CompiledKernels())
    assert share.coverage == 1.0 and share.custom_kernels == ["gemm_tf32_clamp_lse_kernel", "lse_merge_mish_kernel"]
    assert rule_on_coverage(share.coverage, 1, share.kernels, JudgeConfig()) == CoverageRuling()

# -- the real model's kernels (../shared/real-model-corpus) --------------------------------------------------------

_CORPUS_FILES = sorted(p for part in ("lost-turns", "turn1") for p in (CORPUS / part).glob("*.py")) if CORPUS.is_dir() else []
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@pytest.mark.skipif(not _CORPUS_FILES, reason="the real-model corpus is not beside the checkout (KERNELCRAFT_CORPUS)")
@pytest.mark.parametrize("path", _CORPUS_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in _CORPUS_FILES])
def test_every_kernel_a_real_model_declared_is_its_own_in_the_forms_the_profiler_names_it(path: Path) -> None:
    """Every `__global__` in a reply's native source is a kernel the static check collects, and the names the
    profiler gives it in an anonymous namespace (as an H200's did level2/22's and level2/54's first turns, both
    rejected for coverage 0%, lost-turns/README.md) are the candidate's own."""
    source = path.read_text()
    native = [_COMMENT.sub("", n.value) for n in ast.walk(ast.parse(source))
              if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    declared = [m for text in native for m in KERNEL_NAME_RE.finditer(text)]
    assert len(declared) == sum(len(re.findall(r"\b__global__\b", text)) for text in native) > 0
    names = check_source(source, enforce=False).kernel_names
    assert names == {m.group(1) for m in declared}
    for name in names:
        for profiled in (f"(anonymous namespace)::{name}(float const*, float*, int, int)",
                         f"void (anonymous namespace)::{name}<128, 4, (Mode)1>(float const*, float*, int)",
                         f"void kc::(anonymous namespace)::{name}<&(act(float))>(float*)", f"{name}(float2 const*, float*)"):
            assert is_custom_kernel(profiled, names, CompiledKernels()), profiled
        assert not is_custom_kernel(f"void at::native::(anonymous namespace)::{name}<4>(float*)", names, CompiledKernels())
