"""Static checks on candidate source: the first, cheapest line of defence (docs/judge.md).

The rules are `static_rules.STATIC_RULES`, applied here exactly: a rejection names the line, what it found and
the rule's reason, in the words the prompts state; flags are findings a person should see. Runtime checks in
the worker back up every rule, so a rule that is missed statically is still caught when it acts.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .static_rules import (ARCH_VARIABLE, ASSIGN_TO_MODULE, BY_ATTRIBUTE, BY_CONSTRUCT, BY_IMPORT, BY_NAME,
                           ENV_READS, ENV_WRITES, INHERIT_MODEL, NATIVE_MIN_CHARS, OS_BEYOND, OS_FUNCTIONS, OS_MODULE,
                           OS_PATH_FUNCTIONS, RELATIVE_IMPORT, SUPER_FORWARD, StaticRule, call_rule, native_rules)

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
_NATIVE = native_rules()


@dataclass(frozen=True)
class Violation:
    """One rejection: where, what was found with the rule's reason, and the rule's key ("syntax" and
    "model_new" for a file that cannot be judged at all)."""

    line: int
    message: str
    rule: str


@dataclass
class StaticReport:
    violations: list[Violation] = field(default_factory=list)
    flags: list[tuple[str, str]] = field(default_factory=list)
    kernel_names: set[str] = field(default_factory=set)  # CUDA __global__ and @triton.jit names

    @property
    def ok(self) -> bool:
        return not self.violations

    def message(self) -> str:
        """The first five distinct findings, each with the lines it was found on."""
        lines: dict[str, list[int]] = {}
        for v in self.violations:
            lines.setdefault(v.message, []).append(v.line)
        return "; ".join(f"line{'s' if len(at) > 1 else ''} {', '.join(map(str, at))}: {msg}"
                         for msg, at in list(lines.items())[:5])


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_arch(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == ARCH_VARIABLE


def _os_name_allowed(full: str) -> bool:
    """Whether `full` ("os.path.join") is a name of os's allowed part, as an import may name it."""
    parts = full.split(".")
    if parts[:2] == [OS_MODULE, "path"]:
        return len(parts) == 2 or (len(parts) == 3 and parts[2] in OS_PATH_FUNCTIONS)
    return len(parts) == 2 and (parts[1] in OS_FUNCTIONS or parts[1] == "environ")


class _Checker(ast.NodeVisitor):
    def __init__(self, report: StaticReport, parents: dict[ast.AST, ast.AST]) -> None:
        self.r = report
        self.parents = parents
        self.aliases: dict[str, str] = {}  # local name -> module path, for imported modules

    def bad(self, node: ast.AST, what: str, rule: StaticRule) -> None:
        self.r.violations.append(Violation(getattr(node, "lineno", 0), f"{what}: {rule.reason}", rule.key))

    def found(self, node: ast.AST, what: str, rule: StaticRule) -> None:
        """`what`, under `rule`: a rejection, or the rule's flag."""
        if rule.flag:
            self.r.flags.append((rule.flag, f"line {getattr(node, 'lineno', 0)}: {what}: {rule.reason}"))
        else:
            self.bad(node, what, rule)

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
            top = a.name.split(".")[0]
            if top == OS_MODULE:
                if a.name not in (OS_MODULE, f"{OS_MODULE}.path"):
                    self.bad(node, f"import of {a.name}", BY_CONSTRUCT[OS_BEYOND])
            elif top in BY_IMPORT:
                self.found(node, f"import of {a.name}", BY_IMPORT[top])
            elif (named := call_rule(a.name)) is not None:
                self.found(node, f"import of {a.name}", named[1])
            self.aliases[a.asname or top] = a.name if a.asname else top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        top = mod.split(".")[0]
        if node.level:
            self.bad(node, f"relative import (from {'.' * node.level}{mod})", BY_CONSTRUCT[RELATIVE_IMPORT])
        elif top in BY_IMPORT:
            self.found(node, f"import from {mod}", BY_IMPORT[top])
        for a in node.names:
            full = f"{mod}.{a.name}"
            if top == OS_MODULE and not node.level:
                if not _os_name_allowed(full):
                    self.bad(node, f"import of {full}", BY_CONSTRUCT[OS_BEYOND])
            elif (named := call_rule(full)) is not None:
                self.found(node, f"import of {full}", named[1])
            self.aliases[a.asname or a.name] = full

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in BY_NAME:
            self.bad(node, node.id, BY_NAME[node.id])
        base = self.aliases.get(node.id)
        if base is not None and base.split(".")[0] == OS_MODULE:
            what = self._os_use(node, base)
            if what:
                self.bad(node, what, BY_CONSTRUCT[OS_BEYOND])

    def _os_use(self, name: ast.Name, base: str) -> str | None:
        """What an os name is used for, where that is beyond os's allowed part (None: allowed)."""
        node: ast.AST = name
        chain = base
        parent = self.parents.get(node)
        while isinstance(parent, ast.Attribute) and parent.value is node:
            chain, node, parent = f"{chain}.{parent.attr}", parent, self.parents.get(parent)
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            return None  # assigning to a module's attribute: a rule of its own
        parts = chain.split(".")
        if parts[:2] != [OS_MODULE, "environ"]:  # os.path itself as a value reaches os (os.path.os): only its functions
            return None if len(parts) > 1 and _os_name_allowed(chain) and chain != f"{OS_MODULE}.path" else chain
        rest = parts[2:]
        if not rest:  # the mapping itself: read it, or set ARCH_VARIABLE
            if isinstance(parent, ast.Subscript) and parent.value is node:
                if isinstance(parent.ctx, ast.Load) or _is_arch(parent.slice):
                    return None
                return f"{chain}[{ast.unparse(parent.slice)}] written"
            if isinstance(parent, ast.Compare) and node in parent.comparators \
                    and all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
                return None
            if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node:
                return None
            return chain
        if len(rest) == 1 and isinstance(parent, ast.Call) and parent.func is node:
            if rest[0] in ENV_READS or (rest[0] in ENV_WRITES and parent.args and _is_arch(parent.args[0])):
                return None
        return chain

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in BY_ATTRIBUTE:
            self.bad(node, node.attr, BY_ATTRIBUTE[node.attr])
        full = self.resolve(_dotted(node))
        named = call_rule(full) if full else None
        if named is not None:
            self.found(node, full, named[1])
            return  # one finding for the whole name, not one for each of its parts
        self.generic_visit(node)

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            root = _dotted(target)
            if root and root.split(".")[0] in self.aliases:
                self.bad(target, f"assignment to {root}", BY_CONSTRUCT[ASSIGN_TO_MODULE])
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

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew":
            for b in node.bases:
                if _dotted(b) in ("Model",) or (_dotted(b) or "").endswith(".Model"):
                    self.bad(node, INHERIT_MODEL, BY_CONSTRUCT[INHERIT_MODEL])
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
            self.bad(node, SUPER_FORWARD, BY_CONSTRUCT[SUPER_FORWARD])
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) >= NATIVE_MIN_CHARS:
            for pattern, rule in _NATIVE:
                m = pattern.search(node.value)
                if m:
                    self.found(node, f"{m.group(0).strip()} in native source", rule)
            self.r.kernel_names.update(KERNEL_NAME_RE.findall(node.value))


def check_source(source: str, *, filename: str = "candidate.py", enforce: bool = True) -> StaticReport:
    """Check candidate source against `static_rules.STATIC_RULES`. With `enforce=False` only syntax and
    `ModelNew` are required (the rules still run, to collect kernel names and flags, but do not reject)."""
    report = StaticReport()
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        report.violations.append(Violation(e.lineno or 0, f"syntax error: {e.msg}", "syntax"))
        return report
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    _Checker(report, parents).visit(tree)
    if not enforce:
        report.violations.clear()
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        report.violations.append(Violation(0, "no class ModelNew defined at module level", "model_new"))
    return report


__all__ = ["StaticReport", "Violation", "check_source"]
