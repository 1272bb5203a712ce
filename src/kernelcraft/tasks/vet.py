"""Vetting a task's reference: is it a fair task? (docs/judge.md, exploit class 12)

Runs inside a trusted judge worker (standard library and torch only). For several seeds and
input distributions (the task's own, and others: not only `torch.rand`), it flags references
that fail to run, are nondeterministic, give outputs that do not depend on the input, or whose
outputs an all-zeros or constant answer passes at the task's tolerance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

DEGENERATE = {"zeros_pass", "constant_pass", "input_independent", "nondeterministic", "reference_error"}


def _randn(x: torch.Tensor) -> torch.Tensor:
    return torch.randn_like(x)


def _uniform_pm1(x: torch.Tensor) -> torch.Tensor:
    return torch.rand_like(x) * 2 - 1


def _wide(x: torch.Tensor) -> torch.Tensor:
    return torch.randn_like(x) * 10


DISTRIBUTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor] | None] = {
    "task": None, "randn": _randn, "uniform_pm1": _uniform_pm1, "wide": _wide,
}


@dataclass
class Finding:
    code: str
    distribution: str
    message: str


@dataclass
class VetReport:
    findings: list[Finding] = field(default_factory=list)

    @property
    def degenerate(self) -> bool:
        """Degenerate on the task's own inputs: a constant answer or a broken reference would pass."""
        return any(f.code in DEGENERATE and f.distribution == "task" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"degenerate": self.degenerate, "findings": [asdict(f) for f in self.findings]}


def _tensors(out: Any) -> list[torch.Tensor]:
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [o.detach().float() for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]


def _close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True) for x, y in zip(a, b))


def vet_reference(model: torch.nn.Module, make_inputs: Callable[[int], list[Any]], seeds: list[int],
                  atol: float, rtol: float) -> VetReport:
    report = VetReport()
    for dist, transform in DISTRIBUTIONS.items():
        outs: list[list[torch.Tensor]] = []
        for seed in seeds:
            xs = make_inputs(seed)
            if transform is not None:
                torch.manual_seed(seed)
                xs = [transform(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
                if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in xs):
                    break
            try:
                with torch.no_grad():
                    first = _tensors(model(*xs))
                    again = _tensors(model(*xs))
            except Exception as e:  # noqa: BLE001 - a reference that fails is a finding, not a crash
                report.findings.append(Finding("reference_error", dist, f"{type(e).__name__}: {e}"[:300]))
                break
            if not first:
                report.findings.append(Finding("no_float_output", dist, "the reference returns no floating-point tensor"))
                break
            if not all(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)) for a, b in zip(first, again)):
                report.findings.append(Finding("nondeterministic", dist, "two runs on the same inputs differ (dropout in training mode, or a random op?)"))
            if any(bool(torch.isnan(a).any()) for a in first):
                report.findings.append(Finding("nan_output", dist, "the reference returns NaN on these inputs"))
            outs.append(first)
        if len(outs) < 2:
            continue
        if all(_close(outs[0], o, atol, rtol) for o in outs[1:]):
            report.findings.append(Finding("input_independent", dist, f"outputs for {len(outs)} different inputs agree within atol={atol:g}, rtol={rtol:g}"))
        ref = outs[0]
        if _close([torch.zeros_like(t) for t in ref], ref, atol, rtol):
            report.findings.append(Finding("zeros_pass", dist, f"an all-zeros answer passes at atol={atol:g}, rtol={rtol:g} (max |output| {max(float(t.abs().max()) for t in ref):.3g})"))
        elif _close([torch.full_like(t, float(t.nan_to_num().mean())) for t in ref], ref, atol, rtol):
            report.findings.append(Finding("constant_pass", dist, "a constant answer (the output's mean) passes at the task's tolerance"))
    # one finding per code and distribution
    seen: set[tuple[str, str]] = set()
    report.findings = [f for f in report.findings if (f.code, f.distribution) not in seen and not seen.add((f.code, f.distribution))]
    return report
