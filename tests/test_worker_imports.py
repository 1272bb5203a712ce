"""The judge's trust boundary in imports: what runs in a worker's process (judge/worker/, and the
messages of judge/protocol.py) imports only the standard library, torch, numpy and triton, and none of
the judge's parent side (the pool, the sandbox, the evaluation) or of its third-party dependencies."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import kernelcraft

JUDGE = Path(kernelcraft.__file__).parent / "judge"
THIRD_PARTY = {"torch", "numpy", "triton"}
# kernelcraft modules a worker may import: its own package, the messages, the configuration they carry,
# and the task runtime (standard library and torch).
OWN = ("kernelcraft.judge.worker", "kernelcraft.judge.protocol", "kernelcraft.judge.config", "kernelcraft.tasks")
WORKER_SIDE = [*sorted((JUDGE / "worker").rglob("*.py")), JUDGE / "protocol.py", JUDGE / "config.py"]


def _module(path: Path) -> str:
    parts = path.relative_to(JUDGE.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules `path` imports (relative imports resolved)."""
    package = _module(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module != "__future__":
                found.add(node.module)
    return found


def _allowed(name: str) -> bool:
    top = name.split(".")[0]
    if name in ("kernelcraft", "kernelcraft.judge"):  # package inits, run first by any import below them: both light
        return True
    if top == "kernelcraft":
        return any(name == own or name.startswith(own + ".") for own in OWN)
    return top in sys.stdlib_module_names or top in THIRD_PARTY


def test_the_worker_side_imports_only_the_standard_library_torch_numpy_and_triton() -> None:
    wrong = [f"{p.relative_to(JUDGE)} imports {name}" for p in WORKER_SIDE for name in sorted(_imports(p)) if not _allowed(name)]
    assert not wrong, wrong


def test_the_messages_and_the_configuration_import_only_the_standard_library() -> None:
    for path in (JUDGE / "protocol.py", JUDGE / "config.py"):
        wrong = {n for n in _imports(path) if n.split(".")[0] not in sys.stdlib_module_names and n != "kernelcraft.judge.config"}
        assert not wrong, (path.name, wrong)


def test_the_worker_package_init_imports_nothing() -> None:
    tree = ast.parse((JUDGE / "worker" / "__init__.py").read_text())
    assert [type(n) for n in tree.body] == [ast.Expr], "docstring only"


def test_the_judge_package_init_loads_its_names_lazily() -> None:
    """Every import a worker makes runs kernelcraft/judge/__init__ first: it imports only the standard library."""
    assert {n.split(".")[0] for n in _imports(JUDGE / "__init__.py")} <= {"importlib", "typing"}
    import kernelcraft.judge as judge
    assert all(getattr(judge, name) is not None for name in judge.__all__)


def test_starting_a_worker_loads_no_module_of_the_parent_side() -> None:
    """As a worker starts (`python -I -S`, the module path set as confine.BOOT sets it): the confinement
    and the worker loop (or the builder, a profile's driver, the tool runner), and nothing of the pool, the
    sandbox, the evaluation, or pydantic."""
    path = [str(JUDGE.parent.parent), *(p for p in sys.path if p and Path(p).is_absolute())]
    code = (f"import json,sys;sys.path[:]=json.loads({json.dumps(json.dumps(path))});"
            "import kernelcraft.judge.worker.confine, kernelcraft.judge.worker.loop, kernelcraft.judge.worker.builder;"
            "import kernelcraft.judge.worker.profile_driver, kernelcraft.judge.worker.run_tool;"
            "print(json.dumps(sorted(sys.modules)))")
    loaded = json.loads(subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True,
                                       timeout=300).stdout)
    ours = [m for m in loaded if m.startswith("kernelcraft.") and not _allowed(m)]
    assert not ours, ours
    assert "kernelcraft.judge.worker.loop" in loaded
    foreign = [m for m in ("pydantic", "fastapi", "httpx", "uvicorn", "yaml", "typer", "transformers") if m in loaded]
    assert not foreign, foreign
