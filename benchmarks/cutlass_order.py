"""The order in which the CUTLASS kernels walk their output tiles, against cuBLAS, kernel time alone (Hopper).

cuBLAS's Hopper kernels come in two tile orders and both cluster directions, picked per shape
(benchmarks/cublas_kernels.py). The template's persistent CUTLASS kernels take the order as arguments
(raster: CUTLASS's heuristic, along M or along N; swizzle 1, 2, 4 or 8), so one build per kernel
serves every order. This builds each configuration's candidate once (the nvcc builds side by side),
checks every order's output against torch.matmul, and times each order's kernel against torch.matmul's
in one process, interleaved, queued behind the L2 flush so that only device time counts
(benchmarks/device_clock.py, as the `device` clock of gemm_gap.py). Prints, per shape and configuration, torch.matmul's median
us, the heuristic order's ratio (torch.matmul's time over the kernel's) at swizzle 1 and 4 as the
search judges it, and the best order's ratio with its name.

    python benchmarks/cutlass_order.py --shapes 8192x12288x12288,4096x2048x4096 --iters 20
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from device_clock import queued_ms  # noqa: E402  (sibling scripts: benchmarks run as `python benchmarks/X.py`)
from kernelbench_style import module_from_source  # noqa: E402
from kernelcraft.judge import TimingConfig  # noqa: E402
from kernelcraft.judge.worker.timing import Clock  # noqa: E402
from kernelcraft.search.gemm_cutlass import RASTERS, CutlassConfig, render_cutlass  # noqa: E402
from kernelcraft.tasks import TaskError, parse_shapes  # noqa: E402

CONFIGS = {  # cuBLAS's commonest Hopper tile (256x128, its cluster 1x2: ours 128x256 with 2 programs along M), both ways
    "coop128x256_c2x1": CutlassConfig(128, 256, 64, 2, 1, "cutlass_cooperative", "persistent"),
    "coop128x256_c1x2": CutlassConfig(128, 256, 64, 1, 2, "cutlass_cooperative", "persistent"),
    "coop256x128_c1x2": CutlassConfig(256, 128, 64, 1, 2, "cutlass_cooperative", "persistent"),
}
SWIZZLES = (1, 2, 4, 8)
ORDERS = list(itertools.product(RASTERS, SWIZZLES))


def build(name: str, config: CutlassConfig) -> Any:
    return module_from_source(render_cutlass(config), f"order_{name}").ModelNew().ext


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", required=True, help="MxNxK,...")
    ap.add_argument("--iters", type=int, default=20, help="Interleaved calls per order and shape.")
    args = ap.parse_args()
    try:
        shapes = parse_shapes(args.shapes)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("error: the CUTLASS kernels need a Hopper GPU (compute capability 9.0)", file=sys.stderr)
        return 2
    torch.set_grad_enabled(False)
    with ThreadPoolExecutor(len(CONFIGS)) as pool:
        exts = dict(zip(CONFIGS, pool.map(lambda item: build(*item), CONFIGS.items())))
    clock = Clock(torch.device("cuda"), TimingConfig())
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; device time alone, median of {args.iters}")
    print(f"{'shape':>18} {'config':>17} {'mm us':>8} {'heur sw1':>8} {'heur sw4':>8} {'best':>7}  best order")
    for s in shapes:
        a = torch.randn(s.m, s.k, device="cuda", dtype=torch.float16)
        b = torch.randn(s.k, s.n, device="cuda", dtype=torch.float16)
        expected = torch.matmul(a, b)
        for name, ext in exts.items():
            sides = {"mm": (torch.matmul, [a, b])}
            sides.update({(r, sw): (ext.gemm, [a, b, sw, RASTERS[r], 1]) for r, sw in ORDERS})
            wrong = []
            for key, (fn, fn_args) in sides.items():
                if key != "mm" and not torch.allclose(fn(*fn_args), expected, atol=2e-1, rtol=2e-2):
                    wrong.append(key)
            times: dict[Any, list[float]] = {key: [] for key in sides}
            for _ in range(args.iters):
                for key, (fn, fn_args) in sides.items():
                    times[key].append(queued_ms(clock, fn, fn_args) * 1000)
            med = {key: statistics.median(v) for key, v in times.items()}
            ratio = {key: med["mm"] / med[key] for key in med if key != "mm"}
            best = max(ratio, key=ratio.__getitem__)
            print(f"{str(s):>18} {name:>17} {med['mm']:8.1f} {ratio[('heuristic', 1)]:7.3f}x {ratio[('heuristic', 4)]:7.3f}x "
                  f"{ratio[best]:6.3f}x  {best[0]} sw{best[1]}" + (f"  WRONG: {wrong}" if wrong else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
