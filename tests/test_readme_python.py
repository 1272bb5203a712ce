"""docs/python.md's snippets (the README points there for use from Python), run as a user would run them (in a
fresh directory, as their own processes), the model server being a real OpenAI-compatible one on loopback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import ROOT
from .fake_openai import FakeOpenAI

LIBRARY_ROWMS = ("Here it is.\n\n```python\nimport torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                 "    def forward(self, x):\n        return (x * x).mean(dim=-1)\n```\n")


def _snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python.md").read_text(), flags=re.S)


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=900)


def test_the_python_pages_snippets_run(tmp_path: Path, cache_dir: Path) -> None:
    evaluate, optimize = _snippets()
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "kernelcraft-workspace").mkdir()
    (tmp_path / "kernelcraft-workspace" / "cache").symlink_to(cache_dir)  # the session's builds: none is built twice
    p = _run(evaluate, tmp_path)
    assert p.returncode == 0, p.stderr
    summary, details = p.stdout.splitlines()
    assert re.fullmatch(r"correct: examples/leaky_relu_clamp on cpu, \d+\.\d\dx.*", summary), summary
    assert details.startswith("True ") and "'timing', 'audit']" in details

    def reply(messages: list[dict[str, Any]]) -> str:
        return LIBRARY_ROWMS

    with FakeOpenAI(models=["Qwen/Qwen3-Coder"], responder=reply) as srv:
        p = _run(optimize.replace("http://localhost:8000/v1", srv.url), tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "finished 2 model calls" and lines[1].startswith("examples/row_mean_square no correct kernel")
    assert len(lines) == 3 and lines[2].split(" ", 1)[1].startswith("hack_detected: examples/row_mean_square on cpu")
