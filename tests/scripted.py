"""Kernels and role detection for scripted models: the CPU candidates the tests' fake endpoints
answer with (a fast one, a slow but correct one, a wrong one), and which agent role a request is."""

from __future__ import annotations

from typing import Any

from .conftest import CANDIDATES

FAST = (CANDIDATES / "cpu" / "leaky_relu_clamp.py").read_text()
# The same loop built without optimization: correct, and slower than PyTorch.
SLOW = (FAST.replace('extra_cflags=["-O3", "-march=native", "-fno-trapping-math"]', 'extra_cflags=["-O0"]')
        .replace('name="kc_cpu_leaky_relu_clamp"', 'name="kc_cpu_leaky_relu_clamp_O0"'))
WRONG = FAST.replace("return _ext.leaky_relu_clamp(", "return 1.5 * _ext.leaky_relu_clamp(")
assert SLOW != FAST and WRONG != FAST


def fenced(source: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{source}```\n"


def restyled(source: str, note: str) -> str:
    """The same kernel with a different comment and spacing: judged once, whatever the comments say."""
    return f"# {note}\n" + source.replace("    def forward(self, x):", "    def forward(self, x):  # " + note)


def role(messages: list[dict[str, Any]]) -> str:
    system = messages[0]["content"]
    for marker, name in (("You choose which optimization techniques", "selector"), ("You distil reusable", "summarizer"),
                         ("You do not write code: you propose optimization ideas", "planner"),
                         ("You rewrite PyTorch modules", "coder")):
        if marker in system:
            return name
    raise AssertionError(f"unknown role: {system[:120]}")


def turn(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")
