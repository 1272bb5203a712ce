"""The package order (docs/architecture.md): a package imports only from packages before it, and the page's
diagram is the import graph as the code has it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import kernelcraft

ORDER = ["tasks", "judge", "kernels", "llm", "store", "service", "agents", "skills", "search", "train", "report", "pack", "bench",
         "cli"]
ROOT = Path(kernelcraft.__file__).parent
PAGE = ROOT.parent.parent / "docs" / "architecture.md"


def _imported_packages(path: Path) -> set[str]:
    """First-level kernelcraft packages a module imports (absolute or relative)."""
    rel = path.relative_to(ROOT).parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel[:-1])[: len(rel) - node.level]
                parts = base + (node.module.split(".") if node.module else [])
                if not node.module and len(base) == 0:
                    parts = [alias.name for alias in node.names]
            elif node.module and node.module.startswith("kernelcraft."):
                parts = node.module.split(".")[1:]
            else:
                continue
            if parts:
                found.add(parts[0].removesuffix(".py"))
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("kernelcraft.")}
    return found


def test_packages_import_only_from_those_before_them() -> None:
    wrong = []
    for path in ROOT.rglob("*.py"):
        own = path.relative_to(ROOT).parts[0].removesuffix(".py")
        if own not in ORDER:
            continue
        for dep in _imported_packages(path) - {own}:
            if dep in ORDER and ORDER.index(dep) > ORDER.index(own):
                wrong.append(f"{path.relative_to(ROOT)} imports {dep}")
    assert not wrong, wrong


def test_the_llm_package_knows_nothing_of_kernels_or_torch() -> None:
    for path in (ROOT / "llm").rglob("*.py"):
        assert "torch" not in _module_names(path), path


def _module_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_settings_module_imports_no_package() -> None:
    """Every package reads user settings through `kernelcraft.settings`, so it may import none of them."""
    assert not _imported_packages(ROOT / "settings.py") & set(ORDER)
    assert not _imported_packages(ROOT / "user_config.py") & set(ORDER)  # a user's defaults: files read by settings


def package_graph() -> str:
    """Who imports whom among the packages, as the mermaid block of docs/architecture.md."""
    edges = set()
    for path in ROOT.rglob("*.py"):
        own = path.relative_to(ROOT).parts[0].removesuffix(".py")
        if own in ORDER:
            edges |= {(own, dep) for dep in (_imported_packages(path) & set(ORDER)) - {own}}
    ordered = sorted(edges, key=lambda e: (ORDER.index(e[0]), ORDER.index(e[1])))
    return "\n".join(["graph BT"] + [f"    {a} --> {b}" for a, b in ordered])


def test_the_architecture_page_draws_the_imports_as_the_code_has_them() -> None:
    drawn = re.search(r"```mermaid\n(.*?)\n```", PAGE.read_text(), re.S)
    assert drawn is not None, f"{PAGE} has no mermaid block"
    assert drawn.group(1) == package_graph(), f"the diagram in {PAGE} is stale; its block should read:\n{package_graph()}"
