"""Load tasks: a KernelBench-format file, a directory of them, a KernelBench tree, or the bundled suite.

Loading only parses (AST): nothing a task file contains is executed here, so listing a suite of
hundreds of problems is fast and safe.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .model import CHECKS, DTYPES, Task, TaskMeta

EXAMPLES_DIR = Path(__file__).parent / "examples"
EXAMPLES_SUITE = "examples"
_NAME_RE = re.compile(r"^(\d+)_(.+)$")
_LEVEL_RE = re.compile(r"^level_?(\d+)$")


class TaskError(Exception):
    """A task that cannot be used; the message is one line fit for a user."""


def _parse_meta(tree: ast.Module, where: str) -> TaskMeta:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "KERNELCRAFT" for t in node.targets
        ):
            try:
                raw = ast.literal_eval(node.value)
            except ValueError as e:
                raise TaskError(f"{where}:{node.lineno}: KERNELCRAFT must be a literal dict ({e})") from None
            if not isinstance(raw, dict):
                raise TaskError(f"{where}:{node.lineno}: KERNELCRAFT must be a dict")
            meta = TaskMeta.from_dict(raw)
            if meta.dtype not in DTYPES:
                raise TaskError(f"{where}: dtype {meta.dtype!r} is not one of {', '.join(DTYPES)}")
            unknown = sorted(set(meta.checks) - set(CHECKS))
            if unknown:
                raise TaskError(f"{where}: unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
            return meta
    return TaskMeta()


def check_task_source(source: str, where: str) -> ast.Module:
    """Parse a task file and check it defines `Model`, `get_inputs` and `get_init_inputs`."""
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as e:
        raise TaskError(f"{where}:{e.lineno}: syntax error: {e.msg}") from None
    names = {
        n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise TaskError(f"{where}: not a KernelBench-format task: missing {', '.join(missing)}")
    return tree


def module_constants(source: str) -> set[str]:
    """The names a task's module assigns at top level: the constants `--set` may override."""
    return {n.id for node in ast.parse(source).body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for n in ast.walk(t) if isinstance(n, ast.Name)}


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
        raise TaskError(f"{path}: no such task file")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot read ({e})") from None
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
