"""Full-tensor comparison of outputs, in the task's trusted worker (correctness seeds and timing spot
checks) and, for the second-shape flag, in the candidate's worker; imports only torch."""

from __future__ import annotations

from typing import Any

import torch

from ..protocol import Mismatch

_CHUNK = 1 << 24  # elements per chunk: bounds the memory of comparing multi-GB outputs
_TRUTH_CHUNK = 1 << 22  # float64 chunks, several temporaries each


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


def within_tolerance(got: Any, expected: Any, atol: float, rtol: float) -> bool:
    """Whether tensor `got` passes `compare_tensors` against `expected`, without its statistics: a spot
    check's quick yes (a fifth of the time); a no is described by `compare_tensors`."""
    if not isinstance(got, torch.Tensor) or not isinstance(expected, torch.Tensor) \
            or got.shape != expected.shape or got.dtype != expected.dtype:
        return False
    work = torch.float64 if expected.dtype == torch.float64 else torch.float32
    g, e = got.detach().reshape(-1), expected.detach().reshape(-1)
    for start in range(0, e.numel(), _CHUNK):
        gc, ec = g[start:start + _CHUNK].to(e.device, work), e[start:start + _CHUNK].to(work)
        if not bool(torch.isclose(gc, ec, rtol=rtol, atol=atol, equal_nan=True).all()):
            return False
    return True


def compare_with_truth(got: torch.Tensor, ref: torch.Tensor, truth: torch.Tensor, atol: float, rtol: float, k: float,
                       device: torch.device | None = None) -> Mismatch:
    """Compare every element against a float64 truth: an element passes when the candidate's error
    against the truth is within the tolerance (atol + rtol * |truth|), or no larger than `k` times
    the task-dtype reference's own error there. A kernel more accurate than the reference passes; one
    that drops to a lower precision beyond the tolerance fails, since the reference's own error is far
    smaller. Where the reference is NaN the candidate must be NaN, where it is infinite the candidate
    must equal it, and where only the truth is not finite the reference decides, by the tolerance."""
    if got.shape != ref.shape:
        return Mismatch(False, reason=f"shape {tuple(got.shape)} != expected {tuple(ref.shape)}")
    if got.dtype != ref.dtype:
        return Mismatch(False, reason=f"dtype {got.dtype} != expected {ref.dtype}")
    g, r, t = (x.detach().reshape(-1) for x in (got, ref, truth))
    device = device or t.device
    total = t.numel()
    res = Mismatch(True, total=total, truth=True, truth_factor=k)
    worst_excess = -float("inf")
    sums = {"cand": 0.0, "ref": 0.0, "truth": 0.0}
    for start in range(0, total, _TRUTH_CHUNK):
        end = start + _TRUTH_CHUNK
        gc, rc, tc = g[start:end].to(device), r[start:end].to(device), t[start:end].to(device, torch.float64)
        e_c, e_r = torch.sub(tc, gc).abs_(), torch.sub(tc, rc).abs_()  # promoted to float64 as they are read
        allowed = torch.maximum(tc.abs().mul_(rtol).add_(atol), e_r * k)
        ok = e_c <= allowed
        finite = bool(torch.isfinite(rc).all()) and bool(torch.isfinite(tc).all())
        if not finite:  # the rare chunk with NaN or infinity: the rules for them, element by element
            ok = torch.where(torch.isfinite(tc), ok, (gc - rc).abs() <= atol + rtol * rc.abs())
            ok = torch.where(torch.isinf(rc), gc == rc, ok)
            ok = torch.where(torch.isnan(rc), torch.isnan(gc), ok)
            both = torch.isfinite(tc) & torch.isfinite(rc)
            e_r = torch.where(both, e_r, 0.0)
            tc0 = torch.where(both, tc, 0.0)
        else:
            both, tc0 = None, tc
        fc = torch.isfinite(e_c) if both is None else both & torch.isfinite(e_c)
        bad = int(ok.numel() - ok.sum())
        res.bad += bad
        if not bool(fc.all()) and both is None or both is not None and bool((both & ~fc).any()):
            res.max_abs = res.max_rel = float("inf")
        e_cf = torch.where(fc, e_c, 0.0)
        if e_cf.numel():
            res.max_abs = max(res.max_abs, float(e_cf.max()))
            res.ref_max_abs = max(res.ref_max_abs, float(e_r.max()))
            rel = e_cf / tc.abs().clamp_min(atol)
            res.max_rel = max(res.max_rel, float(torch.where(tc.abs() > atol, rel, 0.0).max()))
        sums["cand"] += float(torch.dot(e_cf, e_cf))
        sums["ref"] += float(torch.dot(e_r, e_r))
        sums["truth"] += float(torch.dot(tc0, tc0))
        if bad:
            excess = torch.where(ok, -float("inf"), (e_c - allowed).nan_to_num(float("inf"), posinf=float("inf")))
            i = int(torch.argmax(excess))
            if float(excess[i]) > worst_excess:
                worst_excess = float(excess[i])
                index = torch.unravel_index(torch.tensor(start + i), tuple(truth.shape)) if truth.dim() else ()
                res.worst_index = [int(x) for x in index]
                res.worst_got, res.worst_expected = float(gc[i]), float(tc[i])
    norm = sums["truth"] ** 0.5
    res.rel_l2 = sums["cand"] ** 0.5 / norm if norm > 0 else (0.0 if sums["cand"] == 0 else float("inf"))
    res.ref_rel_l2 = sums["ref"] ** 0.5 / norm if norm > 0 else (0.0 if sums["ref"] == 0 else float("inf"))
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
