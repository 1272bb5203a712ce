"""Whose a profiled kernel is, by its name: the function a name denotes, and the kernels compiled into
the candidate's own extension modules.

For every kernel a translation unit compiles, template instantiations included, nvcc emits a host
function of the kernel's own mangled name (the launch stub; an `extern "C"` kernel's is its C name), a
function symbol of the extension's shared object, of internal linkage too (anonymous namespaces, `static`). The profiler names a kernel by that same mangled name, demangled (kineto passes a name
over 1024 characters on as it is). So a kernel whose profiled name is one of those symbols, or
demangles from one, was compiled from the candidate's source, whatever namespace it is in: a CUTLASS
or CuTe template the candidate instantiates is its own, while a library's precompiled kernel (cuBLAS's,
PyTorch's) is not in the candidate's binary. Only function symbols count, read from the ELF symbol
tables: a string planted in the source (a library kernel's mangled name as a literal) is no symbol.
"""

from __future__ import annotations

import struct
from pathlib import Path

import torch

from .cxx_names import canonical_mangled, parse_function_name

_SYMBOL_TABLES = (2, 11)  # SHT_SYMTAB, SHT_DYNSYM
_STT_FUNC = 2


def kernel_identifier(name: str) -> tuple[str, str]:
    """(namespace root, function name) of a profiler kernel name such as
    'void at::native::vectorized_elementwise_kernel<4, ...>(...)' ('at'), '(anonymous namespace)::k(float*)'
    ('(anonymous namespace)'), 'my_kernel' (''), or a mangled one ('_Z9my_kernelPf'); ('', name) for a name that
    is no function's ('Memcpy DtoD (Device -> Device)')."""
    parsed = parse_function_name(name)
    return ("", name) if parsed is None else (parsed.root, parsed.function)


def function_symbols(data: bytes) -> set[str]:
    """The names of the functions a 64-bit little-endian ELF object defines, from its symbol tables;
    nothing for another kind of file."""
    if data[:6] != b"\x7fELF\x02\x01":
        return set()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # (name, type, flags, addr, offset, size, link, info, addralign, entsize) of each section header
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind not in _SYMBOL_TABLES or not entsize:
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name, info, _, section = struct.unpack_from("<IBBH", data, at)
            if info & 0xF == _STT_FUNC and section != 0:  # a function, defined here (not imported)
                start = strings + name
                names.add(data[start:data.index(b"\0", start)].decode(errors="replace"))
    return names


class CompiledKernels:
    """The function names in the candidate's extension modules, indexed by function name, so that a
    profiled name is compared with only the few that could be it."""

    def __init__(self) -> None:
        self._by_function: dict[str, set[str]] = {}
        self._answers: dict[str, bool] = {}  # by profiled name: a call launches the same kernels many times

    def add_binary(self, path: str | Path) -> None:
        """Take in the function names of the shared object at `path` (an extension `load_inline` built): mangled
        ones, and the C names of `extern "C"` kernels, whose launch stubs are named as they are."""
        for name in function_symbols(Path(path).read_bytes()):
            self._by_function.setdefault(kernel_identifier(name)[1], set()).add(name)
        self._answers.clear()

    def holds(self, profiled: str) -> bool:
        """Whether a kernel the profiler named `profiled` (mangled or demangled) was compiled into one of the binaries."""
        if profiled not in self._answers:
            symbols = self._by_function.get(kernel_identifier(profiled)[1], set())
            # A kernel's launch stub and its device function may be mangled apart: an `L` of internal linkage
            # before the name that the profiler's name lacks (CUTLASS 4's `static` device_kernel; nvcc 13 marks a
            # template in a namespace so), or, across compilers, another name for an anonymous namespace.
            # Demangled, both read 'void cutlass::device_kernel<...>(...)', but a GemmUniversal's 1,176-character
            # name did not demangle on an H200 (kineto passes names over 1024 characters on mangled): the mangled
            # names are also compared canonically.
            wanted, plain = torch._C._demangle(profiled), canonical_mangled(profiled)
            self._answers[profiled] = profiled in symbols or any(
                canonical_mangled(m) == plain or torch._C._demangle(m) == wanted for m in symbols if m.startswith("_Z"))
        return self._answers[profiled]
