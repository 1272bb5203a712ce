"""Full-tensor comparison of outputs. Used by the parent (trusted outputs, on the judge's device)
and, for timing spot checks, inside the worker; imports only torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

_CHUNK = 1 << 24  # elements per chunk: bounds the memory of comparing multi-GB outputs


@dataclass
class Mismatch:
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    rel_l2: float = 0.0
    bad: int = 0  # elements outside tolerance
    total: int = 0
    worst_index: list[int] | None = None
    worst_got: float | None = None
    worst_expected: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if self.reason:
            return self.reason
        where = f" at index {tuple(self.worst_index)}" if self.worst_index is not None else ""
        return (f"{self.bad}/{self.total} elements outside tolerance; worst{where}: got {self.worst_got:.6g}, "
                f"expected {self.worst_expected:.6g} (max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}, "
                f"rel L2 {self.rel_l2:.3g})")


def compare_tensors(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float,
                    device: torch.device | None = None, nan_skips: bool = False) -> Mismatch:
    """Compare every element: |got - expected| <= atol + rtol * |expected|, NaN only where expected is NaN.
    With `nan_skips`, a NaN in `expected` marks an element not checked (the binary_exact check).

    The work runs on `device` (default: where `expected` is), one chunk at a time, so multi-GB
    outputs held in host memory are compared at the GPU's speed without a full device copy."""
    if got.shape != expected.shape:
        return Mismatch(False, reason=f"shape {tuple(got.shape)} != expected {tuple(expected.shape)}")
    if got.dtype != expected.dtype:
        return Mismatch(False, reason=f"dtype {got.dtype} != expected {expected.dtype}")
    g = got.detach().reshape(-1)
    e = expected.detach().reshape(-1)
    device = device or e.device
    total = e.numel()
    res = Mismatch(True, total=total)
    worst_excess = -float("inf")
    diff_sq = 0.0
    ref_sq = 0.0
    # float32 is exact enough for differences at these tolerances and twice as fast as float64;
    # sums of squares accumulate in float64.
    work = torch.float64 if expected.dtype == torch.float64 else torch.float32
    for start in range(0, total, _CHUNK):
        gc = g[start:start + _CHUNK].to(device, work)
        ec = e[start:start + _CHUNK].to(device, work)
        diff = (gc - ec).abs()
        nan_g, nan_e = torch.isnan(gc), torch.isnan(ec)
        both_nan = nan_g & nan_e
        inf_same = torch.isinf(ec) & (gc == ec)
        diff = torch.where(both_nan | inf_same, torch.zeros_like(diff), diff)
        diff = torch.where(nan_g ^ nan_e, torch.full_like(diff, float("inf")), diff)
        if nan_skips:
            diff = torch.where(nan_e, torch.zeros_like(diff), diff)
            res.total -= int(nan_e.sum())
        allowed = atol + rtol * ec.abs().nan_to_num(0.0, posinf=0.0)
        excess = diff - allowed
        bad = excess > 0
        res.bad += int(bad.sum())
        finite = diff.isfinite()
        if finite.any():
            res.max_abs = max(res.max_abs, float(diff[finite].max()))
            # relative error where it means something: away from zero
            sig = finite & (ec.abs() > atol)
            if sig.any():
                res.max_rel = max(res.max_rel, float((diff[sig] / ec[sig].abs()).max()))
        if not bool(finite.all()):
            res.max_abs = res.max_rel = float("inf")
        d = diff.nan_to_num(0.0, posinf=0.0)
        diff_sq += float(torch.sum(d * d, dtype=torch.float64))
        ec0 = ec.nan_to_num(0.0, posinf=0.0, neginf=0.0)
        ref_sq += float(torch.sum(ec0 * ec0, dtype=torch.float64))
        if excess.numel():
            i = int(torch.argmax(excess.nan_to_num(float("inf"))))
            if float(excess[i]) > worst_excess:
                worst_excess = float(excess[i])
                index = torch.unravel_index(torch.tensor(start + i), tuple(expected.shape)) if expected.dim() else ()
                res.worst_index = [int(x) for x in index]
                res.worst_got, res.worst_expected = float(gc[i]), float(ec[i])
    res.rel_l2 = (diff_sq ** 0.5) / (ref_sq ** 0.5) if ref_sq > 0 else (0.0 if diff_sq == 0 else float("inf"))
    res.ok = res.bad == 0
    return res


def flatten_outputs(out: Any) -> list[Any]:
    """A forward's result as a list: a tensor, or a tuple/list of them (other values kept as they are)."""
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def compare_outputs(got: list[Any], expected: list[Any], atol: float, rtol: float,
                    device: torch.device | None = None, nan_skips: bool = False) -> Mismatch:
    """Compare two flattened forward results; the worst per-output result is returned."""
    if len(got) != len(expected):
        return Mismatch(False, reason=f"returned {len(got)} outputs, expected {len(expected)}")
    worst = Mismatch(True)
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(e, torch.Tensor):
            if g != e:
                return Mismatch(False, reason=f"output {i}: {g!r} != expected {e!r}")
            continue
        if type(g) is not torch.Tensor:
            return Mismatch(False, reason=f"output {i} is {type(g).__name__}, expected a torch.Tensor")
        m = compare_tensors(g, e, atol, rtol, device, nan_skips)
        if not m.ok:
            if len(expected) > 1:
                m.reason = f"output {i}: {m.describe()}"
            return m
        worst.total += m.total
        worst.max_abs, worst.max_rel, worst.rel_l2 = max(worst.max_abs, m.max_abs), max(worst.max_rel, m.max_rel), max(worst.rel_l2, m.rel_l2)
    return worst
