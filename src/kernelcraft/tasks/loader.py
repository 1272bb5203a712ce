"""Load tasks: a KernelBench-format file, a directory of them, a KernelBench tree, or the bundled suite.

Loading only parses (AST): nothing a task file contains is executed here, so listing a suite of
hundreds of problems is fast and safe.
"""

from __future__ import annotations

import ast
import operator
import re
from pathlib import Path
from typing import Any

from .model import CHECKS, DTYPES, Task, TaskMeta

EXAMPLES_DIR = Path(__file__).parent / "examples"
EXAMPLES_SUITE = "examples"
_NAME_RE = re.compile(r"^(\d+)_(.+)$")
_LEVEL_RE = re.compile(r"^level_?(\d+)$")


class TaskError(Exception):
    """A task that cannot be used. The message is one line fit for the task's owner and may quote its file (a
    syntax error, a bad value); `reason` gives the cause in words that quote nothing of the file, for whoever may
    not read it (the reward service answering a client about a file on the server)."""

    def __init__(self, message: str, reason: str = "not a usable task") -> None:
        super().__init__(message)
        self.reason = reason


BAD_META = "its KERNELCRAFT metadata is invalid"


def _parse_meta(tree: ast.Module, where: str) -> TaskMeta:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "KERNELCRAFT" for t in node.targets
        ):
            try:
                raw = ast.literal_eval(node.value)
            except (ValueError, TypeError, MemoryError, RecursionError) as e:  # TypeError: an unhashable key
                raise TaskError(f"{where}:{node.lineno}: KERNELCRAFT must be a literal dict ({e})", BAD_META) from None
            if not isinstance(raw, dict):
                raise TaskError(f"{where}:{node.lineno}: KERNELCRAFT must be a dict", BAD_META)
            try:
                meta = TaskMeta.from_dict(raw)
            except (TypeError, ValueError, AttributeError) as e:  # e.g. tags or sizes of the wrong kind
                raise TaskError(f"{where}:{node.lineno}: KERNELCRAFT: {e}", BAD_META) from None
            if meta.dtype not in DTYPES:
                raise TaskError(f"{where}: dtype {meta.dtype!r} is not one of {', '.join(DTYPES)}", BAD_META)
            unknown = sorted(set(meta.checks) - set(CHECKS))
            if unknown:
                raise TaskError(f"{where}: unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}", BAD_META)
            return meta
    return TaskMeta()


def check_task_source(source: str, where: str) -> ast.Module:
    """Parse a task file and check it defines `Model`, `get_inputs` and `get_init_inputs`."""
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as e:
        raise TaskError(f"{where}:{e.lineno}: syntax error: {e.msg}", "not valid Python") from None
    except (MemoryError, RecursionError):  # the parser's own limits: nesting too deep
        raise TaskError(f"{where}: nested too deeply to parse", "not valid Python") from None
    names = {
        n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise TaskError(f"{where}: not a KernelBench-format task: missing {', '.join(missing)}",
                        "not a KernelBench-format task (Model, get_inputs, get_init_inputs)")
    return tree


def module_constants(source: str) -> set[str]:
    """The names a task's module assigns at top level: the constants `--set` may override."""
    return {n.id for node in ast.parse(source).body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for n in ast.walk(t) if isinstance(n, ast.Name)}


# Integer arithmetic a task's constants are written in (`1024 * 2`, `1 << 20`), read without executing anything.
_INT_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
            ast.Pow: operator.pow, ast.LShift: operator.lshift}
_INT_BOUND = 2**64  # operands past it, or a power or shift over 64, are not read: a source cannot make the reader slow
_UNREAD = object()  # a constant whose value is not read


class _NotRead(Exception):
    """An expression `constant_values` does not read."""


def _value(node: ast.expr, known: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        if node.id not in known:
            raise _NotRead
        return known[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(item, known) for item in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        a, b = _value(node.left, known), _value(node.right, known)
        if not all(type(x) is int and abs(x) < _INT_BOUND for x in (a, b)):
            raise _NotRead
        if isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= b <= 64:
            raise _NotRead
        try:
            return _INT_OPS[type(node.op)](a, b)
        except ZeroDivisionError:
            raise _NotRead from None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _NotRead from None


def constant_values(source: str) -> dict[str, Any]:
    """The value of each module-level constant written as a literal, or as integer arithmetic over literals and the
    constants before it (`M = 1024 * 2`, `shape = (batch_size, 3)`); the others are left out. Nothing is executed."""
    known: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value: Any = _UNREAD
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and not isinstance(node, ast.AugAssign) \
                and node.value is not None:
            try:
                value = _value(node.value, known)
            except (_NotRead, RecursionError):
                pass
        for name in (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
            known.pop(name, None)  # assigned again (`N += 1`, `A, B = ...`): an earlier value no longer holds
        if value is not _UNREAD:
            known[targets[0].id] = value
    return known


def task_from_source(source: str, key: str, *, path: Path | None = None, suite: str = "",
                     level: int | None = None) -> Task:
    """Build a `Task` from source text (checked, not executed)."""
    where = str(path) if path else key
    tree = check_task_source(source, where)
    stem = key.rsplit("/", 1)[-1]
    m = _NAME_RE.match(stem)
    problem_id, name = (int(m.group(1)), m.group(2)) if m else (None, stem)
    return Task(key=key, name=name, source=source, suite=suite, level=level, problem_id=problem_id,
                path=path, meta=_parse_meta(tree, where))


def load_task_file(path: Path, *, key: str | None = None, suite: str = "", level: int | None = None) -> Task:
    """Load one task file."""
    if not path.is_file():
        raise TaskError(f"{path}: no such task file", "no such task file")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot read ({e})", "cannot be read as text") from None
    if level is None:
        lm = _LEVEL_RE.match(path.parent.name)
        level = int(lm.group(1)) if lm else None
    if key is None:
        key = f"level{level}/{path.stem}" if level is not None else path.stem
    return task_from_source(source, key, path=path, suite=suite, level=level)


def _sort_key(p: Path) -> tuple:
    m = _NAME_RE.match(p.stem)
    return (int(m.group(1)), p.stem) if m else (10**9, p.stem)


def _task_files(directory: Path) -> list[Path]:
    return sorted((p for p in directory.glob("*.py") if not p.name.startswith("_")), key=_sort_key)


def load_suite(target: str | Path) -> list[Task]:
    """Load every task of `target`: a file, a directory of task files, a KernelBench tree
    (folders `level1`..`level4`, or a tree containing `KernelBench/level*`), or `examples`."""
    # The bundled suite's name wins over a local folder of that name unless it holds task files.
    if str(target) == EXAMPLES_SUITE and not list(Path(target).glob("*.py")):
        return [load_task_file(p, key=f"{EXAMPLES_SUITE}/{p.stem}", suite=EXAMPLES_SUITE)
                for p in _task_files(EXAMPLES_DIR)]
    root = Path(target)
    if root.is_file():
        return [load_task_file(root)]
    if not root.is_dir():
        raise TaskError(f"{root}: no such file or directory")
    if (root / "KernelBench").is_dir() and not any(root.glob("level*")):
        root = root / "KernelBench"
    levels = sorted((d for d in root.iterdir() if d.is_dir() and _LEVEL_RE.match(d.name)),
                    key=lambda d: int(_LEVEL_RE.match(d.name).group(1)))
    suite = root.name
    if levels:
        tasks = [load_task_file(p, suite=suite, level=int(_LEVEL_RE.match(d.name).group(1)))
                 for d in levels for p in _task_files(d)]
    else:
        tasks = [load_task_file(p, suite=suite) for p in _task_files(root)]
    if not tasks:
        raise TaskError(f"{root}: no task files (*.py) found")
    return tasks


def find_solution(task: Task, directory: Path) -> Path | None:
    """The solution file for `task` in a KernelBench-style solutions directory, matched by problem:
    `level1/19_ReLU.py`, `19_ReLU.py`, `level1/19_*.py`, `level_1_problem_19*.py`, or `<name>.py`."""
    stem = task.key.rsplit("/", 1)[-1]
    exact = [directory / f"{task.key}.py", directory / f"{stem}.py", directory / f"{task.name}.py"]
    for p in exact:
        if p.is_file():
            return p
    if task.problem_id is not None and task.level is not None:
        patterns = [(directory / f"level{task.level}", f"{task.problem_id}_*.py"),
                    (directory, f"level_{task.level}_problem_{task.problem_id}_*.py"),
                    (directory, f"level{task.level}_{task.problem_id}_*.py")]
        for folder, pattern in patterns:
            hits = sorted(folder.glob(pattern)) if folder.is_dir() else []
            if hits:
                return hits[0]
    return None
