"""C++ function names as the profiler, Nsight Compute and ELF symbol tables give a kernel's: parsed into the
scopes around the function and the function's own name, whatever the C++ form of its declaration.

A demangled name ('void ns::(anonymous namespace)::k<128, (Mode)1>(float const*, int)') is read depth-aware
over its brackets, since template arguments and parameter types hold `::`, spaces and parentheses of their
own (function-pointer types, `&(f(float))`, lambdas); a name that begins with a parenthesis is a function in an
anonymous namespace. An Itanium-mangled one ('_ZN2ns12_GLOBAL__N_11kILi128EEEvPKfi') is read up to the
function's own name: kineto passes a name over 1024 characters on as it is, and only the name matters here.
Anything else the profiler lists (a copy, 'Memcpy DtoD (Device -> Device)') is no function name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# How an anonymous namespace reads demangled: the C++ ABI's demangler's words (abi::__cxa_demangle, which
# kineto and torch._C._demangle call) and EDG's, which NVIDIA's tools print. Mangled, its name starts with
# `_GLOBAL__N`: g++'s `_GLOBAL__N_1`, nvcc's `_GLOBAL__N__<hash>_<length>_<file>_<hash>`.
ANONYMOUS = "(anonymous namespace)"
_ANONYMOUS_FORMS = (ANONYMOUS, "<unnamed>")
_ANONYMOUS_MANGLED = "_GLOBAL__N"
_ANONYMOUS_GXX = "_GLOBAL__N_1"
_ANONYMOUS_MANGLED_NAME = re.compile(r"(\d+)(_GLOBAL__N)")
# The internal-linkage marker: an `L` before a name's length, after a name or a scope's start.
_INTERNAL_LINKAGE = re.compile(r"(?<=\w)L(?=[1-9])")
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")
_ABI_TAG = re.compile(r"\[abi:\w+\]")
# What may follow a function's parameters: qualifiers, and the suffix of a compiler's clone.
_TRAILER = re.compile(r"(?:\s*(?:const|volatile|&&|&|\[clone [^\]]*\]))*\s*")
_CLOSERS = {"(": ")", "<": ">", "[": "]", "{": "}"}
# A source name in a mangled name: its length, then the name; an `L` before it marks internal linkage.
_SOURCE_NAME = re.compile(r"L?(\d+)")


@dataclass(frozen=True)
class FunctionName:
    """A function's name, parsed: its enclosing scopes, outermost first (an anonymous namespace as
    ANONYMOUS), its own name, and the template arguments it was instantiated with as written ('<4, float>';
    empty for none, and for a mangled name, whose arguments are not decoded)."""

    scopes: tuple[str, ...]
    function: str
    template_args: str = ""

    @property
    def root(self) -> str:
        """The outermost scope: the namespace a library's kernel is in ('at', 'cutlass'); '' at global scope."""
        return self.scopes[0] if self.scopes else ""

    @property
    def qualified(self) -> str:
        """'ns::(anonymous namespace)::k'."""
        return "::".join((*self.scopes, self.function))


def _group_end(text: str, start: int) -> int:
    """The index just past the bracket group that opens at `text[start]`, or -1 where it does not close.
    Angle brackets count only among template arguments: inside parentheses, braces and square brackets
    they are operators ('(2>1)', 'decltype(a->b)') or parts of names."""
    stack: list[str] = []
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{" or (c == "<" and (not stack or stack[-1] == "<")):
            stack.append(c)
        elif c in ")]}" or (c == ">" and stack and stack[-1] == "<"):
            if not stack or _CLOSERS[stack.pop()] != c:
                return -1
            if not stack:
                return i + 1
    return -1


def _component(text: str, at: int) -> tuple[str, str, int] | None:
    """One scope or function name of a demangled name at `at`: (name, template arguments, where it ends)."""
    for form in _ANONYMOUS_FORMS:
        if text.startswith(form, at):
            return ANONYMOUS, "", at + len(form)
    if text.startswith("{", at):  # '{lambda(int)#1}', '{unnamed type#1}'
        end = _group_end(text, at)
        return None if end < 0 else (text[at:end], "", end)
    m = _IDENTIFIER.match(text, at)
    if not m:
        return None
    end = m.end()
    while tag := _ABI_TAG.match(text, end):
        end = tag.end()
    if not text.startswith("<", end):
        return m.group(), "", end
    close = _group_end(text, end)
    return None if close < 0 else (m.group(), text[end:close], close)


def parse_demangled(name: str) -> FunctionName | None:
    """The function a demangled name denotes: '[void ]scope::...::name[<args>][(params)][ const]', the return
    type printed for a template's instance (a kernel's is void), the parameters absent where the name is a
    C one (an `extern "C"` or Triton kernel's). None for anything else."""
    text = name.strip()
    at = 5 if text.startswith("void ") else 0
    parts: list[str] = []
    while True:
        found = _component(text, at)
        if found is None:
            return None
        part, template_args, at = found
        parts.append(part)
        if not text.startswith("::", at):
            break
        at += 2
    if text.startswith("(", at):
        at = _group_end(text, at)
        if at < 0:
            return None
    if _TRAILER.fullmatch(text, at) is None or parts[-1] == ANONYMOUS:
        return None
    return FunctionName(tuple(parts[:-1]), parts[-1], template_args)


def parse_mangled(name: str) -> FunctionName | None:
    """The scopes and name of an Itanium-mangled function ('_ZN2at6native6kernelI...' -> at, native, kernel).
    Only the function's own name matters, which comes first, so the arguments are not decoded."""
    if not name.startswith("_Z"):
        return None
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
        if not m or not int(m.group(1)):
            break
        end = m.end() + int(m.group(1))
        part = rest[m.end():end]
        parts.append(ANONYMOUS if part.startswith(_ANONYMOUS_MANGLED) else part)
        rest = rest[end:]
        if not nested:
            break
    return FunctionName(tuple(parts[:-1]), parts[-1]) if parts else None


@lru_cache(maxsize=4096)
def parse_function_name(name: str) -> FunctionName | None:
    """The function a kernel's name denotes, mangled or demangled; None for what is no function's name. Cached: a
    profiled call names the same few kernels many times, and a template's name runs to kilobytes."""
    return parse_mangled(name) if name.startswith("_Z") else parse_demangled(name)


def _anonymous_length(digits: str) -> int:
    """The length of an anonymous namespace's name from the digits before it, read from the right, fewest first:
    a name before it may end in digits ('ns1'), and the shortest reading takes in no more than the namespace's
    own name. Its name is no shorter than g++'s `_GLOBAL__N_1`."""
    for size in range(1, len(digits) + 1):
        text = digits[-size:]
        if text[0] != "0" and int(text) >= len(_ANONYMOUS_GXX):
            return int(text)
    return 0


def canonical_mangled(name: str) -> str:
    """A mangled name as two builds of one kernel both give it: without the internal-linkage marker (an `L`
    before a name's length, which a kernel's host stub may have and its device name lacks; a literal of an
    enum type, `IL5Major0E`, loses its `L` too, on both sides alike) and with every anonymous namespace's
    name as g++'s (nvcc's holds a hash of the file)."""
    out, at = [], 0
    for m in _ANONYMOUS_MANGLED_NAME.finditer(name):
        length = _anonymous_length(m.group(1))
        if m.start(2) < at or not length:
            continue
        start = m.start(2) - len(str(length))
        out.append(name[at:start] + f"{len(_ANONYMOUS_GXX)}{_ANONYMOUS_GXX}")
        at = m.start(2) + length
    out.append(name[at:])
    return _INTERNAL_LINKAGE.sub("", "".join(out))


def kernel_label(name: str, width: int = 80) -> str:
    """A kernel's name for people, at most `width` characters: its qualified name and template arguments,
    without the return type and parameters ('at::native::reduce_kernel<512, 1>'); a name that is no
    function's as it is. Cut at `width` with '...'."""
    parsed = parse_function_name(name)
    label = name if parsed is None else parsed.qualified + parsed.template_args
    return label if len(label) <= width else label[:width - 3] + "..."


__all__ = ["ANONYMOUS", "FunctionName", "canonical_mangled", "kernel_label", "parse_demangled", "parse_function_name",
           "parse_mangled"]
