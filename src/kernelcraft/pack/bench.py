"""Time a kernel pack against torch.matmul on this machine, with the judge's clock.

Offline: calls back to back, L2 flushed before each, the device synchronized before the end event.
Server: the same, after an untimed pause, exponential with mean 1/QPS. Pack and torch.matmul are
timed in turn (ABAB), medians reported. Dispatch overhead is host time: what `pack.matmul` adds per
call over calling its route (the kernel's forward, the padded call, torch.matmul) directly."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..judge.config import TimingConfig
from ..judge.worker.timing import Clock, server_pause
from .loader import KernelPack, Matmul, load

SCENARIOS = ("offline", "server")


@dataclass(frozen=True)
class BenchRow:
    """One shape in one scenario: the pack's time against torch.matmul's."""

    shape: str  # MxNxK
    in_pack: bool
    route: str  # how the pack served it
    scenario: str
    pack_ms: float  # median
    torch_ms: float  # median
    overhead_us: float | None  # dispatch overhead per call, in the first scenario's row of each shape
    match: bool  # the pack's result equals torch.matmul's within fp16 tolerance

    @property
    def speedup(self) -> float:
        return self.torch_ms / self.pack_ms

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "speedup": self.speedup}


def default_extra_shapes(shapes: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Shapes the pack lacks, near the ones it has: each pack shape with M 32 smaller."""
    extra = [(m - 32, n, k) for m, n, k in shapes if m > 32]
    return [s for s in dict.fromkeys(extra) if s not in shapes]


def _sync(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def dispatch_overhead_us(pack_call: Matmul, direct: Matmul, a: torch.Tensor, b: torch.Tensor, *,
                         calls: int = 20, reps: int = 25) -> float:
    """Median host time per call that `pack_call` takes over `direct` on the same inputs, in microseconds.
    Host time (launches are asynchronous on a GPU) of `calls` calls, few enough not to fill the launch
    queue; the two sides alternate which goes first."""
    sync = _sync(a.device)
    diffs = []
    for rep in range(reps):
        spans = {}
        for name, fn in ((("direct", direct), ("pack", pack_call)) if rep % 2 == 0 else (("pack", pack_call), ("direct", direct))):
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(a, b)
            spans[name] = time.perf_counter() - t0
            sync()
        diffs.append((spans["pack"] - spans["direct"]) / calls * 1e6)
    return statistics.median(diffs)


def _times(clock: Clock, pack: KernelPack, a: torch.Tensor, b: torch.Tensor, iters: int) -> tuple[float, float]:
    """Median ms of pack.matmul and of torch.matmul, timed in turn."""
    sides = {"pack": pack.matmul, "torch": torch.matmul}
    for fn in sides.values():  # warm up: first calls compile, allocate, tune
        fn(a, b)
    samples: dict[str, list[float]] = {"pack": [], "torch": []}
    for i in range(iters):
        for name in (("pack", "torch") if i % 2 == 0 else ("torch", "pack")):
            samples[name].append(clock.time_call(sides[name], [a, b])[0])
    return statistics.median(samples["pack"]), statistics.median(samples["torch"])


def bench_pack(pack_dir: str | Path, extra_shapes: list[tuple[int, int, int]] | None = None, *,
               scenarios: tuple[str, ...] = SCENARIOS, qps: float = 200.0, iters: int = 50, force: bool = False,
               fallback: bool = False, seed: int = 0) -> list[BenchRow]:
    """Time the pack in `pack_dir` against torch.matmul on its own shapes and on `extra_shapes` (default
    `default_extra_shapes`), in each of `scenarios` ("offline", "server" at `qps`), `iters` calls per side.
    Raises PackError when the pack does not load (see `load`)."""
    pack = load(pack_dir, force=force, fallback=fallback)
    device = torch.device(pack.manifest.device)
    shapes = pack.shapes
    extra = default_extra_shapes(shapes) if extra_shapes is None else [s for s in extra_shapes if s not in shapes]
    cfg = TimingConfig()
    rng = random.Random(seed)
    clocks = {sc: Clock(device, cfg, server_pause(qps, rng) if sc == "server" else None) for sc in scenarios}
    gen = torch.Generator(device=device).manual_seed(seed)
    rows = []
    for m, n, k in [*shapes, *extra]:
        a = torch.randn(m, k, generator=gen, device=device, dtype=pack.dtype)
        b = torch.randn(k, n, generator=gen, device=device, dtype=pack.dtype)
        route = pack.route(a, b)
        match = torch.allclose(pack.matmul(a, b).float(), torch.matmul(a, b).float(), atol=1e-2, rtol=1e-2)
        overhead = dispatch_overhead_us(pack.matmul, route.call, a, b)
        for sc in scenarios:
            pack_ms, torch_ms = _times(clocks[sc], pack, a, b, iters)
            rows.append(BenchRow(shape=f"{m}x{n}x{k}", in_pack=(m, n, k) in shapes, route=route.describe(), scenario=sc,
                                 pack_ms=pack_ms, torch_ms=torch_ms, overhead_us=overhead if sc == scenarios[0] else None,
                                 match=match))
    return rows
