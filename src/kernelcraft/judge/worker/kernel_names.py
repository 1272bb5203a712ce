"""Whose a profiled kernel is, by its name: the function a name denotes, and the kernels compiled into
the candidate's own extension modules.

For every kernel a translation unit compiles, template instantiations included, nvcc emits a host
function of the kernel's own mangled name (the launch stub), a function symbol of the extension's
shared object. The profiler names a kernel by that same mangled name, demangled (kineto passes a name
over 1024 characters on as it is). So a kernel whose profiled name is one of those symbols, or
demangles from one, was compiled from the candidate's source, whatever namespace it is in: a CUTLASS
or CuTe template the candidate instantiates is its own, while a library's precompiled kernel (cuBLAS's,
PyTorch's) is not in the candidate's binary. Only function symbols count, read from the ELF symbol
tables: a string planted in the source (a library kernel's mangled name as a literal) is no symbol.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import torch

# A source name in a mangled name: its length, then the name; an `L` before it marks internal linkage.
_SOURCE_NAME = re.compile(r"L?(\d+)")
# That marker (an `L` before a name's length, after a letter or `_`), dropped from both sides when names are compared;
# a literal of an enum type (`IL5Major0E`) loses its `L` too, on both sides alike.
_INTERNAL_LINKAGE = re.compile(r"(?<=[A-Za-z_])L(?=[1-9])")
_SYMBOL_TABLES = (2, 11)  # SHT_SYMTAB, SHT_DYNSYM
_STT_FUNC = 2


def _mangled_parts(name: str) -> list[str]:
    """The scopes and name of an Itanium-mangled function ('_ZN2at6native6kernelI...' -> at, native,
    kernel). The profiler passes a kernel's name on mangled when its demangled form is too long, as
    with CUTLASS's kernels' parameter types; only the function's own name matters here, which comes
    first, so the arguments are not decoded."""
    rest = name[2:]
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:].lstrip("rVKRO")
    parts = []
    while True:
        if nested and rest.startswith("St"):
            parts.append("std")
            rest = rest[2:]
        m = _SOURCE_NAME.match(rest)
        if not m:
            return parts
        end = m.end() + int(m.group(1))
        parts.append(rest[m.end():end])
        rest = rest[end:]
        if not nested:
            return parts


def kernel_identifier(name: str) -> tuple[str, str]:
    """(namespace root, function name) of a profiler kernel name such as
    'void at::native::vectorized_elementwise_kernel<4, ...>(...)', 'my_kernel', or a mangled one
    ('_Z9my_kernelPf')."""
    if name.startswith("_Z"):
        parts = _mangled_parts(name)
    else:
        base = name.removeprefix("void ").split("(")[0].split("<")[0].strip()
        parts = [p for p in base.split("::") if p]
    if not parts:
        return "", name
    return (parts[0] if len(parts) > 1 else ""), parts[-1]


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
    """The mangled names in the candidate's extension modules, indexed by function name, so that a
    profiled name is demangled against only the few that could be it."""

    def __init__(self) -> None:
        self._by_function: dict[str, set[str]] = {}
        self._answers: dict[str, bool] = {}  # by profiled name: a call launches the same kernels many times

    def add_binary(self, path: str | Path) -> None:
        """Take in the mangled function names of the shared object at `path` (an extension `load_inline` built)."""
        for name in function_symbols(Path(path).read_bytes()):
            if not name.startswith("_Z"):
                continue
            self._by_function.setdefault(kernel_identifier(name)[1], set()).add(name)
        self._answers.clear()

    def holds(self, profiled: str) -> bool:
        """Whether a kernel the profiler named `profiled` (mangled or demangled) was compiled into one of the binaries."""
        if profiled not in self._answers:
            mangled = self._by_function.get(kernel_identifier(profiled)[1], set())
            # A kernel of internal linkage (CUTLASS 4's `static` device_kernel) has a launch stub mangled with an `L`
            # before its name ('_ZN7cutlassL13device_kernel...') that the profiler's name lacks
            # ('_ZN7cutlass13device_kernel...'). Demangled, both read 'void cutlass::device_kernel<...>(...)', but a
            # GemmUniversal's 1,176-character name did not demangle on an H200: the mangled names are also compared
            # without the marker.
            wanted, plain = torch._C._demangle(profiled), _INTERNAL_LINKAGE.sub("", profiled)
            self._answers[profiled] = profiled in mangled or any(
                _INTERNAL_LINKAGE.sub("", m) == plain or torch._C._demangle(m) == wanted for m in mangled)
        return self._answers[profiled]
