"""A kernel in every C++ form a candidate declares one, with the names the toolchain and the profiler give it
(issue 45): the table test_kernel_names.py checks the matcher against, built from g++'s and nvcc's output here,
and test_kernel_names_gpu.py from a GPU's profiler.

Each form is a whole CUDA definition of a kernel whose first parameter is `float* x`. Compiled by g++ with
`__global__`, `__device__` and `__launch_bounds__(...)` defined away, it is the host analogue of the kernel: nvcc's
launch stub for it is a host function of the same signature, mangled by the same Itanium C++ ABI. `mangled` is
g++'s mangled name of that function, `profiled` the name the profiler gives the kernel: kineto demangles a
name with abi::__cxa_demangle (libkineto's Demangle.cpp, as torch._C._demangle does) and passes one over 1024
characters on as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

# Both compilers see these first; g++ also gets PRELUDE_GXX before them.
PRELUDE = """#include <utility>
#define KC_THREADS(n) (32 * (n))
namespace kc { enum class Mode { plain, fused }; }
namespace { struct Tag {}; }
__device__ float kc_square(float v) { return v * v; }
"""
PRELUDE_GXX = """#define __global__
#define __device__
#define __launch_bounds__(...)
"""
BODY = "{ x[0] += 1.0f; }"
KINETO_MAX = 1024  # kineto's kMaxSymbolSize: a longer name is not demangled


@dataclass(frozen=True)
class KernelForm:
    """One kernel's declaration (with BODY as its body), the instance a launch names, the arguments after `x` a
    launch passes, its host function's name as g++ mangles it, and the profiler's name for it. `by_name`: whether
    the kernel is the candidate's by its name alone (false in a library's namespace, docs/judge.md class 10)."""

    form: str
    declaration: str
    instance: str
    mangled: str
    profiled: str
    extra_args: str = ""
    by_name: bool = True


_LONG_ARGS = "".join(f"Li{i}E" for i in range(300))
_LONG = f"_ZN12_GLOBAL__N_17kc_longISt16integer_sequenceIiJ{_LONG_ARGS}EEEEvPf"

FORMS = [
    KernelForm("plain", f"__global__ void kc_plain(float* x) {BODY}", "kc_plain", "_Z8kc_plainPf", "kc_plain(float*)"),
    KernelForm("anonymous namespace", f"namespace {{ __global__ void kc_anon(float* x) {BODY} }}", "kc_anon",
               "_ZN12_GLOBAL__N_17kc_anonEPf", "(anonymous namespace)::kc_anon(float*)"),
    KernelForm("nested namespaces", f"namespace kc {{ namespace inner {{ __global__ void kc_nested(float* x) {BODY} }} }}",
               "kc::inner::kc_nested", "_ZN2kc5inner9kc_nestedEPf", "kc::inner::kc_nested(float*)"),
    KernelForm("anonymous namespace in a named one",
               f"namespace kc {{ namespace {{ __global__ void kc_anon_in_ns(float* x) {BODY} }} }}", "kc::kc_anon_in_ns",
               "_ZN2kc12_GLOBAL__N_113kc_anon_in_nsEPf", "kc::(anonymous namespace)::kc_anon_in_ns(float*)"),
    KernelForm("static", f"static __global__ void kc_static(float* x) {BODY}", "kc_static", "_ZL9kc_staticPf",
               "kc_static(float*)"),
    KernelForm("static after __global__", f"__global__ static void kc_static_after(float* x) {BODY}", "kc_static_after",
               "_ZL15kc_static_afterPf", "kc_static_after(float*)"),
    KernelForm("static in a namespace", f"namespace kc {{ static __global__ void kc_static_ns(float* x) {BODY} }}",
               "kc::kc_static_ns", "_ZN2kcL12kc_static_nsEPf", "kc::kc_static_ns(float*)"),
    KernelForm("static in an anonymous namespace",
               f"namespace {{ static __global__ void kc_anon_static(float* x) {BODY} }}", "kc_anon_static",
               "_ZN12_GLOBAL__N_1L14kc_anon_staticEPf", "(anonymous namespace)::kc_anon_static(float*)"),
    KernelForm("template", f"template <class T> __global__ void kc_tmpl(T* x) {BODY}", "kc_tmpl<float>",
               "_Z7kc_tmplIfEvPT_", "void kc_tmpl<float>(float*)"),
    KernelForm("template of non-type arguments", f"template <int N, bool B> __global__ void kc_nontype(float* x) {BODY}",
               "kc_nontype<128, true>", "_Z10kc_nontypeILi128ELb1EEvPf", "void kc_nontype<128, true>(float*)"),
    KernelForm("template of an enum argument", f"template <kc::Mode M> __global__ void kc_enum(float* x) {BODY}",
               "kc_enum<kc::Mode::fused>", "_Z7kc_enumILN2kc4ModeE1EEvPf", "void kc_enum<(kc::Mode)1>(float*)"),
    KernelForm("template in an anonymous namespace",
               f"namespace {{ template <int N> __global__ void kc_anon_tmpl(float* x) {BODY} }}", "kc_anon_tmpl<4>",
               "_ZN12_GLOBAL__N_112kc_anon_tmplILi4EEEvPf", "void (anonymous namespace)::kc_anon_tmpl<4>(float*)"),
    KernelForm("template of an anonymous namespace's type", f"template <class T> __global__ void kc_anon_arg(float* x) {BODY}",
               "kc_anon_arg<Tag>", "_Z11kc_anon_argIN12_GLOBAL__N_13TagEEvPf",
               "void kc_anon_arg<(anonymous namespace)::Tag>(float*)"),
    KernelForm("template of a function-pointer type",
               f"template <class F> __global__ void kc_fn_type(float* x, F f) {BODY}", "kc_fn_type<float (*)(float)>",
               "_Z10kc_fn_typeIPFffEEvPfT_", "void kc_fn_type<float (*)(float)>(float*, float (*)(float))",
               extra_args="nullptr"),
    KernelForm("template of a function pointer", f"template <float (*F)(float)> __global__ void kc_fn_arg(float* x) {BODY}",
               "kc_fn_arg<kc_square>", "_Z9kc_fn_argIXadL_Z9kc_squarefEEEvPf", "void kc_fn_arg<&(kc_square(float))>(float*)"),
    KernelForm("__launch_bounds__ before void", f"__global__ __launch_bounds__(256) void kc_bounds_before(float* x) {BODY}",
               "kc_bounds_before", "_Z16kc_bounds_beforePf", "kc_bounds_before(float*)"),
    KernelForm("__launch_bounds__ after void", f"__global__ void __launch_bounds__(256, 2) kc_bounds_after(float* x) {BODY}",
               "kc_bounds_after", "_Z15kc_bounds_afterPf", "kc_bounds_after(float*)"),
    KernelForm("__launch_bounds__ of a macro, on a template",
               f"template <int N> __global__ void __launch_bounds__(KC_THREADS(N), 1)\nkc_bounds_macro(float* x) {BODY}",
               "kc_bounds_macro<4>", "_Z15kc_bounds_macroILi4EEvPf", "void kc_bounds_macro<4>(float*)"),
    KernelForm('extern "C"', f'extern "C" __global__ void __launch_bounds__(128) kc_extern_c(float* x) {BODY}',
               "kc_extern_c", "kc_extern_c", "kc_extern_c"),
    KernelForm("defined outside its namespace",
               f"namespace kc {{ __global__ void kc_outside(float* x); }}\n__global__ void kc::kc_outside(float* x) {BODY}",
               "kc::kc_outside", "_ZN2kc10kc_outsideEPf", "kc::kc_outside(float*)"),
    KernelForm("parameters of function-pointer and const types",
               f"__global__ void kc_params(float* x, const float* __restrict__ y, float (*f)(float), long n) {BODY}",
               "kc_params", "_Z9kc_paramsPfPKfPFffEl", "kc_params(float*, float const*, float (*)(float), long)",
               extra_args="x, nullptr, 1"),
    KernelForm("a name too long to demangle, in an anonymous namespace",
               f"namespace {{ template <class S> __global__ void kc_long(float* x) {BODY} }}",
               "kc_long<std::make_integer_sequence<int, 300>>", _LONG, _LONG),
    KernelForm("named like a library's kernel, in its namespace",
               f"namespace at {{ namespace native {{ __global__ void vectorized_elementwise_kernel(float* x) {BODY} }} }}",
               "at::native::vectorized_elementwise_kernel", "_ZN2at6native29vectorized_elementwise_kernelEPf",
               "at::native::vectorized_elementwise_kernel(float*)", by_name=False),
]


def profiler_name(mangled: str) -> str:
    """The name the profiler gives a kernel of device name `mangled`, as kineto makes it."""
    import torch

    return mangled if len(mangled) > KINETO_MAX else torch._C._demangle(mangled)


def host_source() -> str:
    """Every form's host analogue, each instance's address taken so that g++ emits it, in one translation unit."""
    uses = ", ".join(f"(void*)&{f.instance}" for f in FORMS)
    return (PRELUDE_GXX + PRELUDE + "\n".join(f.declaration for f in FORMS)
            + f'\nextern "C" __attribute__((used)) void* const kc_uses[] = {{{uses}}};\n')


def cuda_source() -> str:
    """Every form as CUDA, with a host function `launch_all(float* x)` that launches each once, in FORMS' order."""
    launches = "\n".join(f"  {f.instance}<<<1, 1>>>(x{', ' + f.extra_args if f.extra_args else ''});" for f in FORMS)
    return PRELUDE + "\n".join(f.declaration for f in FORMS) + f"\nvoid launch_all(float* x) {{\n{launches}\n}}\n"
