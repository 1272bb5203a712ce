"""Static checks on candidate source: the first, cheapest line of defence (docs/judge.md).

Rejections name the line; flags are findings a person should see. Runtime guards in the worker
back up every rule here, so a rule that is missed statically is still caught when it acts.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

BANNED_MODULES = frozenset({
    "os", "sys", "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "subprocess",
    "socket", "ctypes", "cffi", "importlib", "inspect", "gc", "pickle", "marshal", "builtins",
    "signal", "shutil", "pathlib", "glob", "tempfile", "io", "time", "random",
})
BANNED_NAMES = frozenset({
    "exec", "eval", "compile", "__import__", "open", "globals", "locals", "vars", "breakpoint",
    "setattr", "delattr", "input",
})
BANNED_ATTRS = frozenset({
    "__dict__", "__globals__", "__code__", "__builtins__", "__subclasses__", "__class__",
    "__bases__", "__mro__", "__closure__", "_getframe", "f_globals", "f_locals", "f_back",
})
# Calls that change what the judge measures or hand the work to something else.
BANNED_CALLS = {
    "torch.compile": "torch.compile generates kernels for you; write the kernels",
    "torch.jit.fork": "asynchronous work escapes the timer",
    "torch.jit._fork": "asynchronous work escapes the timer",
    "torch.set_float32_matmul_precision": "the judge pins matmul precision",
    "torch.backends.cuda.matmul.allow_tf32": "the judge pins TF32",
}
BANNED_PREFIXES = ("torch.futures", "torch.multiprocessing", "torch.distributed", "torch._dynamo",
                   "torch._inductor", "torch.utils.data", "torch.library", "torch._C", "torch.overrides")
STREAM_CALLS = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream",
                "torch.cuda.set_stream", "torch.Stream")
# OpenMP (`#pragma omp`) and at::parallel_for are allowed: their regions join before returning, and the
# worker holds them to the reference's thread count (worker/guards.ThreadWatch). Threads of one's own, and
# parallel algorithms (std::execution starts its own pool), are not.
NATIVE_BANS = [
    (re.compile(r"std::thread|#include\s*<thread>|pthread_create|std::async|std::jthread|std::execution"), "native threads"),
    (re.compile(r"\b(fork|vfork|system|popen|execv|execvp|execve|execl|execlp|dlopen|syscall|kill)\s*\("), "process or system calls"),
]
NATIVE_FLAGS = [re.compile(r"cudaStreamCreate|getStreamFromPool|cudaStreamNonBlocking")]
# A `__global__` function's name in native source, whatever stands between `__global__` and it: specifiers,
# `extern "C"`, attributes before or after `void` (`__launch_bounds__(...)`, whose arguments may hold parentheses
# of their own), and the scopes of a kernel defined outside its namespace (`void ns::k(...)`).
_BALANCED = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"  # parentheses, nested up to three deep
_KERNEL_ATTRIBUTES = ("__launch_bounds__", "__maxnreg__", "__cluster_dims__", "__attribute__", "__declspec")
_KERNEL_ATTRIBUTE = rf"(?:{'|'.join(_KERNEL_ATTRIBUTES)})\s*{_BALANCED}|\[\[[^\]]*\]\]"
_KERNEL_SPECIFIER = rf'(?:static|inline|__inline__|__forceinline__|__noinline__)\b|extern\b(?:\s*"C")?|{_KERNEL_ATTRIBUTE}'
KERNEL_NAME_RE = re.compile(
    rf"\b__global__\s+(?:(?:{_KERNEL_SPECIFIER})\s*)*void\b\s*(?:(?:{_KERNEL_ATTRIBUTE})\s*)*(?:::\s*)?"
    rf"(?:[A-Za-z_]\w*\s*::\s*)*(?!(?:{'|'.join(_KERNEL_ATTRIBUTES)})\b)([A-Za-z_]\w*)")


@dataclass
class StaticReport:
    violations: list[tuple[int, str]] = field(default_factory=list)
    flags: list[tuple[str, str]] = field(default_factory=list)
    kernel_names: set[str] = field(default_factory=set)  # CUDA __global__ and @triton.jit names

    @property
    def ok(self) -> bool:
        return not self.violations

    def message(self) -> str:
        return "; ".join(f"line {line}: {msg}" for line, msg in self.violations[:5])


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, report: StaticReport) -> None:
        self.r = report
        self.aliases: dict[str, str] = {}  # local name -> module path, for imported modules

    def bad(self, node: ast.AST, msg: str) -> None:
        self.r.violations.append((getattr(node, "lineno", 0), msg))

    def resolve(self, dotted: str | None) -> str | None:
        if not dotted:
            return None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] in BANNED_MODULES:
                self.bad(node, f"import of {a.name} is not allowed")
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if mod.split(".")[0] in BANNED_MODULES or node.level:
            self.bad(node, f"import from {mod or '.'} is not allowed")
        for a in node.names:
            full = f"{mod}.{a.name}"
            if any(full == c or full.startswith(p) for c in BANNED_CALLS for p in (c + ".",)) or full.startswith(BANNED_PREFIXES):
                self.bad(node, f"{full} is not allowed")
            self.aliases[a.asname or a.name] = full
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in BANNED_NAMES:
            self.bad(node, f"{node.id} is not allowed")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in BANNED_ATTRS:
            self.bad(node, f"access to {node.attr} is not allowed")
        full = self.resolve(_dotted(node))
        if full:
            if full in BANNED_CALLS:
                self.bad(node, f"{full}: {BANNED_CALLS[full]}")
            elif full.startswith(BANNED_PREFIXES):
                self.bad(node, f"{full} is not allowed")
            elif full in STREAM_CALLS:
                self.r.flags.append(("side_stream", f"line {node.lineno}: {full} creates or switches CUDA streams"))
        self.generic_visit(node)

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            root = _dotted(target)
            if root and root.split(".")[0] in self.aliases:
                self.bad(target, f"assignment to {root}: modules may not be modified")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Try(self, node: ast.AST) -> None:
        self.bad(node, "try/except is not allowed: a kernel that fails must fail, not fall back to PyTorch")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew":
            for b in node.bases:
                if _dotted(b) in ("Model",) or (_dotted(b) or "").endswith(".Model"):
                    self.bad(node, "ModelNew may not inherit from the reference Model")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            name = self.resolve(_dotted(target)) or _dotted(target) or ""
            if name in ("triton.jit", "triton.runtime.jit.jit", "triton.runtime.jit"):
                self.r.kernel_names.add(node.name)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "forward" and isinstance(f.value, ast.Call) \
                and isinstance(f.value.func, ast.Name) and f.value.func.id == "super":
            self.bad(node, "super().forward falls back to the reference")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) > 20:
            for pattern, what in NATIVE_BANS:
                m = pattern.search(node.value)
                if m:
                    self.bad(node, f"{what} ({m.group(0).strip()}) in native source are not allowed")
            if any(p.search(node.value) for p in NATIVE_FLAGS):
                self.r.flags.append(("side_stream", f"line {node.lineno}: native source creates CUDA streams"))
            self.r.kernel_names.update(KERNEL_NAME_RE.findall(node.value))


def check_source(source: str, *, filename: str = "candidate.py", enforce: bool = True) -> StaticReport:
    """Check candidate source. With `enforce=False` only syntax and `ModelNew` are required
    (the rules still run, to collect kernel names and flags, but do not reject)."""
    report = StaticReport()
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        report.violations.append((e.lineno or 0, f"syntax error: {e.msg}"))
        return report
    _Checker(report).visit(tree)
    if not enforce:
        report.violations.clear()
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        report.violations.append((0, "no class ModelNew defined at module level"))
    return report
