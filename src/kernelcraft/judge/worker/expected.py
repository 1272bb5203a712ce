"""What a task's outputs should be, per secret seed, in the trusted reference worker (worker side:
imports only the standard library and torch).

For every correctness seed this is the reference's output in the task's dtype and, for floating
outputs, the float64 truth: the same module with its parameters, buffers and inputs cast to double
(exactly) and run on the device. Both are kept on the device while they fit a byte budget, and
computed again for each comparison beyond it, so no output ever goes to a file or to the parent.
For the binary_exact check, the exact outputs for inputs of 0s and 1s (NaN where the task's dtype
cannot hold the exact value, which the comparison skips).

The truth is left out, with the reason, where it does not apply: outputs that are not floating
point, a module that fails in float64, a truth larger than `truth_max_bytes`, or one float64 forward
slower than `truth_max_seconds`. There the reference's own output is the truth, as before.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..protocol import Facts, Mismatch
from .compare import compare_tensors, compare_with_truth, flatten_outputs, within_tolerance

# The largest integer each dtype holds exactly together with every integer below it.
EXACT_INTEGER_LIMIT = {"float16": 2048, "bfloat16": 256, "float32": 1 << 24}


@dataclass
class SeedOutputs:
    """One seed's expected outputs: the reference's, and the float64 truth of each floating one."""

    outputs: list[Any]
    truths: list[torch.Tensor | None]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.outputs + self.truths if isinstance(t, torch.Tensor))


def _is_float(meta: dict[str, Any]) -> bool:
    return meta.get("dtype") in ("torch.float32", "torch.float16", "torch.bfloat16")


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def plain(o: Any) -> Any:
    """A non-tensor output as both sides compare it: a JSON value, or its repr."""
    return o if isinstance(o, (int, float, bool, type(None), str)) else repr(o)


def _floating(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _nbytes(xs: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))


def double_inputs(xs: list[Any]) -> list[Any]:
    """The inputs for the float64 module: floating tensors cast to double (exactly), others copied."""
    return [x.to(torch.float64) if _floating(x) else (x.clone() if isinstance(x, torch.Tensor) else x) for x in xs]


def truths_for(outputs: list[Any], exact: list[Any]) -> list[torch.Tensor | None]:
    """The float64 module's output for each floating output of the reference (None where there is none)."""
    return [e if _floating(o) and isinstance(e, torch.Tensor) and e.shape == o.shape else None for o, e in zip(outputs, exact)]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN equals NaN): did a call write into this tensor?"""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def storages(xs: list[Any]) -> set[int]:
    return {x.untyped_storage().data_ptr() for x in xs if isinstance(x, torch.Tensor) and x.numel()}


class Expected:
    """The expected outputs of a task's secret seeds (trusted worker)."""

    def __init__(self, reference: torch.nn.Module, inputs: Callable[[int, float | None], list[Any]], device: torch.device,
                 dtype: torch.dtype, *, cache_bytes: int, truth_max_bytes: int, truth_max_seconds: float) -> None:
        self.reference = reference
        self.inputs = inputs  # (seed, share of ones or None) -> the task's inputs
        self.device, self.dtype = device, dtype
        self.cache_bytes, self.truth_max_bytes, self.truth_max_seconds = cache_bytes, truth_max_bytes, truth_max_seconds
        self.seeds: list[int] = []
        self.binary: list[dict[str, Any]] = []
        self.exact: torch.nn.Module | None = None
        self.use_truth = False
        self.cache: dict[tuple[str, int], Any] = {}
        self._base = 0

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def _exact_model(self) -> torch.nn.Module:
        if self.exact is None:
            self.exact = copy.deepcopy(self.reference).to(torch.float64)
        return self.exact

    def _forward64(self, xs64: list[Any]) -> list[Any]:
        with torch.no_grad():
            out = flatten_outputs(self._exact_model()(*xs64))
        self._sync()
        return out


    def compute(self, seed: int, truth: bool) -> tuple[SeedOutputs, float]:
        """The reference's outputs for one seed and (with `truth`) their float64 truth; the forward's seconds."""
        xs = self.inputs(seed, None)
        xs64 = double_inputs(xs) if truth else []  # before the forward: a reference may write into its inputs
        t0 = time.perf_counter()
        with torch.no_grad():
            out = flatten_outputs(self.reference(*xs))
        self._sync()
        seconds = time.perf_counter() - t0
        del xs
        truths: list[torch.Tensor | None] = [None] * len(out)
        if truth:
            exact = self._forward64(xs64)
            truths = truths_for(out, exact)
        return SeedOutputs(out, truths), seconds

    # -- once, when the worker is set up for the task -----------------------------------------
    def survey(self, seeds: list[int], binary_seeds: list[int]) -> Facts:
        """Run every seed once: the outputs' description, input mutation and aliasing, the times the
        parent scales its timeouts by, whether the float64 truth applies, the 0/1 input shares, and
        the device memory one seed takes; then fill the cache where everything fits."""
        self.seeds = list(seeds)
        facts = Facts()
        calls, in_s = [], []
        sample: SeedOutputs | None = None
        self._reset_peak()
        for seed in seeds:
            t0 = time.perf_counter()
            xs = self.inputs(seed, None)
            self._sync()
            in_s.append(time.perf_counter() - t0)
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
            t1 = time.perf_counter()
            with torch.no_grad():
                out = flatten_outputs(self.reference(*xs))
            self._sync()
            calls.append(time.perf_counter() - t1)
            facts.mutates_inputs |= any(isinstance(a, torch.Tensor) and not same_bits(a, b) for a, b in zip(xs, before))
            facts.aliases_input |= bool(storages(out) & storages(xs))
            facts.meta.append([describe_output(o) for o in out])
            facts.input_bytes, facts.output_bytes = _nbytes(before), _nbytes(out)
            if sample is None:
                sample = SeedOutputs(out, [None] * len(out))
                facts.peak_bytes = self._peak()
            del xs, before, out
        facts.input_s, facts.call_s = max(in_s), statistics.median(calls)
        self._reset_peak()
        facts.truth, facts.truth_s = self._truth_applies(sample, seeds[0], facts.input_bytes)
        facts.peak_bytes = max(facts.peak_bytes, self._peak())
        self.use_truth = facts.truth == "float64"
        del sample
        facts.binary = self._binary_shares(binary_seeds)
        self.binary = facts.binary
        truth_bytes = 8 * sum(_numel(o["shape"]) for o in facts.meta[0] if _is_float(o)) if self.use_truth else 0
        facts.cached = self._fill_cache((facts.output_bytes + truth_bytes) * len(seeds) + facts.output_bytes * len(self.binary))
        return facts

    def _reset_peak(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self._base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()

    def _peak(self) -> int:
        """Device memory taken since `_reset_peak` at most (0 on the CPU)."""
        return torch.cuda.max_memory_allocated() - self._base if self.device.type == "cuda" else 0

    def _truth_applies(self, sample: SeedOutputs | None, seed: int, input_bytes: int) -> tuple[str, float]:
        """"float64" where the truth applies to the task, else the reason it does not; the seconds of one float64 forward.
        Its size counts the inputs in float64 as well as the outputs (an average pool's outputs are small)."""
        if sample is None or not any(_floating(o) for o in sample.outputs):
            return "no floating-point output: the reference is the truth", 0.0
        if any(isinstance(o, torch.Tensor) and o.dtype == torch.float64 for o in sample.outputs):
            return "the task is already float64", 0.0
        if self.truth_max_bytes < 0:
            return "the float64 truth is off (judge option truth = false): the reference is the truth", 0.0
        size = 8 * (sum(o.numel() for o in sample.outputs if _floating(o)) + input_bytes // self.dtype.itemsize)
        if size > self.truth_max_bytes:
            return f"outputs too large for a float64 truth ({size / 2**30:.1f} GiB of float64 with inputs; the limit is " \
                   f"{self.truth_max_bytes / 2**30:.1f} GiB): the reference is the truth", 0.0
        try:
            t0 = time.perf_counter()
            got, _ = self.compute(seed, truth=True)
            seconds = time.perf_counter() - t0
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
            self.exact = None
            return f"the module does not run in float64 ({type(e).__name__}: {str(e).splitlines()[0][:200]}): " \
                   "the reference is the truth", 0.0
        if not any(t is not None for t in got.truths):
            return "the float64 module's outputs differ in shape: the reference is the truth", seconds
        if seconds > self.truth_max_seconds:
            self.exact = None
            return f"a float64 forward takes {seconds:.1f} s (the limit is {self.truth_max_seconds:g} s): the reference is the truth", seconds
        return "float64", seconds

    def _fill_cache(self, need: int) -> bool:
        """Keep every seed's expected outputs when they fit the budget together (`need` bytes); else
        none: each comparison computes its seed again, and the memory goes back in between."""
        if need > self.cache_bytes:
            return False
        for i, seed in enumerate(self.seeds):
            self.cache[("seed", i)] = self.compute(seed, self.use_truth)[0]
        for j, b in enumerate(self.binary):
            self.cache[("binary", j)] = self._exact_binary(b["seed"], b["p"])
        return True

    # -- the binary_exact check -----------------------------------------------------------------
    def _binary_shares(self, seeds: list[int]) -> list[dict[str, Any]]:
        """Per 0/1 input set, the share of ones: halved from 0.5 until at least half of the output
        elements hold exact integers the task's dtype can represent (a long inner dimension sums many ones)."""
        found = []
        for seed in seeds:
            p, share = 0.5, 0.0
            for _ in range(12):
                exact = self._forward64(double_inputs(self.inputs(seed, p)))
                tensors = [o for o in exact if isinstance(o, torch.Tensor)]
                share = sum(int(self._checkable(o).sum()) for o in tensors) / max(1, sum(o.numel() for o in tensors))
                if share >= 0.5:
                    break
                p /= 2
            found.append({"seed": seed, "p": p, "share": share})
        return found

    def _checkable(self, o: torch.Tensor) -> torch.Tensor:
        limit = EXACT_INTEGER_LIMIT[str(self.dtype).removeprefix("torch.")]
        return (o.abs() <= limit) & (o == o.round())

    def _exact_binary(self, seed: int, p: float) -> list[torch.Tensor]:
        exact = self._forward64(double_inputs(self.inputs(seed, p)))
        return [torch.where(self._checkable(o), o, torch.full_like(o, float("nan"))).to(self.dtype)
                for o in exact if isinstance(o, torch.Tensor)]

    # -- comparisons --------------------------------------------------------------------------------
    def compare(self, kind: str, index: int, got: list[Any], atol: float, rtol: float, k: float) -> list[Mismatch]:
        """The candidate's outputs for seed `index` (kind "seed") or 0/1 input set `index` (kind
        "binary") against what they should be, one Mismatch per output."""
        key = (kind, index)
        held = key in self.cache
        result = self._compare(kind, index, got, atol, rtol, k)
        if not held and self.device.type == "cuda":  # (what it computed is gone with _compare's frame)
            torch.cuda.empty_cache()  # the next task's comparison, or a candidate, needs the memory
        return result

    def _compare(self, kind: str, index: int, got: list[Any], atol: float, rtol: float, k: float) -> list[Mismatch]:
        key = (kind, index)
        if kind == "seed":
            expected = self.cache.get(key) or self.compute(self.seeds[index], self.use_truth)[0]
            return against(got, expected, atol, rtol, k)
        b = self.binary[index]
        exact = self.cache.get(key) or self._exact_binary(b["seed"], b["p"])
        tensors = [g for g in got if isinstance(g, torch.Tensor)]
        if len(tensors) != len(exact):
            return [Mismatch(False, reason=f"returned {len(tensors)} tensors, expected {len(exact)}")]
        return [compare_tensors(g, e, 0.0, 0.0, nan_skips=True) for g, e in zip(tensors, exact)]

    def check_round(self, got: list[Any], inputs: Callable[[], list[Any]], atol: float, rtol: float, k: float,
                    truth: bool) -> list[Mismatch]:
        """A timed call's outputs against the reference's on that round's inputs (`inputs` makes them
        afresh at each call); where that fails and `truth`, the float64 truth decides, from inputs made
        again (the reference may have written into its own). Nothing is kept."""
        with torch.no_grad():
            out = flatten_outputs(self.reference(*inputs()))
        self._sync()
        if len(got) == len(out) and all(within_tolerance(g, e, atol, rtol) for g, e in zip(got, out)):
            found = [Mismatch(True) for _ in out]
        else:
            found = against(got, SeedOutputs(out, [None] * len(out)), atol, rtol, k)
        if truth and not all(m.ok for m in found):
            found = against(got, SeedOutputs(out, truths_for(out, self._forward64(double_inputs(inputs())))), atol, rtol, k)
        del out
        if self.device.type == "cuda":
            torch.cuda.empty_cache()  # the candidate's timing goes on next to this worker
        return found


def against(got: list[Any], expected: SeedOutputs, atol: float, rtol: float, k: float) -> list[Mismatch]:
    """Each output against what it should be: its float64 truth where there is one, else the reference's output."""
    if len(got) != len(expected.outputs):
        return [Mismatch(False, reason=f"returned {len(got)} outputs, expected {len(expected.outputs)}")]
    found = []
    for i, (g, e, t) in enumerate(zip(got, expected.outputs, expected.truths)):
        if not isinstance(e, torch.Tensor):
            same = plain(g) == plain(e)
            found.append(Mismatch(same, reason="" if same else f"output {i}: {plain(g)!r} != expected {plain(e)!r}"))
            continue
        if not isinstance(g, torch.Tensor):
            found.append(Mismatch(False, reason=f"output {i} is {type(g).__name__}, expected a torch.Tensor"))
            continue
        m = compare_with_truth(g, e, t, atol, rtol, k) if t is not None else compare_tensors(g, e, atol, rtol)
        if not m.ok and len(expected.outputs) > 1:
            m.reason = f"output {i}: {m.describe()}"
        found.append(m)
    return found


def describe_output(o: Any) -> dict[str, Any]:
    """An output as the parent checks it: its type, and for a tensor its device, dtype and shape."""
    if isinstance(o, torch.Tensor):
        return {"type": f"{type(o).__module__}.{type(o).__qualname__}", "exact_tensor": type(o) is torch.Tensor,
                "device": str(o.device), "dtype": str(o.dtype), "shape": list(o.shape)}
    return {"type": type(o).__name__, "exact_tensor": False}


__all__ = ["EXACT_INTEGER_LIMIT", "Expected", "Facts", "SeedOutputs", "against", "describe_output", "double_inputs", "plain", "same_bits", "storages", "truths_for"]
