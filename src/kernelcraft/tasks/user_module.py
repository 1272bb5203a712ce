"""A user's own module as a task: `path/model.py:ClassName` and a function that makes example
inputs (`path:fn`). The task's source is one self-contained file (the model file, the inputs
file when it is another, and the three KernelBench names bound to them), because the judge runs
it in a fresh process and the model reads it as the reference."""

from __future__ import annotations

import ast
from pathlib import Path

from .loader import TaskError, task_from_source
from .model import Task


class _Error(Exception):
    pass


def _split(spec: str, what: str) -> tuple[Path, str]:
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise _Error(f"{spec!r}: expected {what} as PATH.py:NAME")
    p = Path(path)
    if not p.is_file():
        raise _Error(f"{p}: no such file")
    return p, name


def _defines(source: str, where: Path) -> dict[str, ast.stmt]:
    try:
        tree = ast.parse(source, filename=str(where))
    except SyntaxError as e:
        raise _Error(f"{where}:{e.lineno}: syntax error: {e.msg}") from None
    return {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}


def task_from_module(model: str, inputs: str, init_inputs: str | None = None) -> Task:
    """The task for class `model` ("path.py:Class") with inputs from `inputs` ("path.py:fn",
    a function of no arguments returning the forward arguments) and, optionally, constructor
    arguments from `init_inputs` ("path.py:fn"). Raises TaskError with a one-line message."""
    try:
        model_path, class_name = _split(model, "the model")
        parts = {model_path.resolve(): model_path.read_text()}
        names = _defines(parts[model_path.resolve()], model_path)
        if not isinstance(names.get(class_name), ast.ClassDef):
            raise _Error(f"{model_path}: no class {class_name} at module level")
        functions = {}
        for spec, role in ((inputs, "the inputs function"), (init_inputs, "the init-inputs function")):
            if spec is None:
                continue
            path, fn = _split(spec, role)
            if path.resolve() not in parts:
                parts[path.resolve()] = path.read_text()
            if not isinstance(_defines(parts[path.resolve()], path).get(fn), ast.FunctionDef):
                raise _Error(f"{path}: no function {fn} at module level")
            functions[role] = fn
    except _Error as e:
        raise TaskError(str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot read the module: {e}") from None
    glue = ["", "", "# kernelcraft: the KernelBench names for this module"]
    if class_name != "Model":
        glue.append(f"Model = {class_name}")
    fn = functions["the inputs function"]
    if fn != "get_inputs":
        glue += ["", "", "def get_inputs():", f"    return list({fn}())"]
    init = functions.get("the init-inputs function")
    if init is None:
        glue += ["", "", "def get_init_inputs():", "    return []"]
    elif init != "get_init_inputs":
        glue += ["", "", "def get_init_inputs():", f"    return list({init}())"]
    source = "\n\n".join(text.rstrip() for text in parts.values()) + "\n".join(glue) + "\n"
    return task_from_source(source, f"user/{model_path.stem}.{class_name}", path=model_path, suite="user")
