"""What the judge's clock sees of its neighbours: a small GEMM timed under the judge's clock while
other processes do what a busy judge pool does next to a measurement.

In a judge pool, torch.matmul at 256x64x128 measured 48 us next to candidates and 32 us timed alone
(NVIDIA H200): the clock counts the call's host time and the device's, so a neighbour on either
slows it. This benchmark times torch.matmul (one process, the judge's `Clock`) under each load:
  quiet       nothing else
  cpu         one busy Python process per CPU core but one (compilers, imports, interpreters)
  cuda_init   processes that start, create a CUDA context, allocate and exit, one after another
              in two lanes (worker starts and task setup, which the device lock does not cover)
  gpu_work    a process launching small kernels back to back (what the device lock keeps away)
  profiled    no neighbour: this process ran the judge's coverage profile (torch.profiler with CUDA
              activity) once before; it runs last, since a process cannot be un-profiled

    python benchmarks/timing_contention.py --shapes 256x64x128,4096x4096x4096
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import torch

from kernelcraft.judge import TimingConfig
from kernelcraft.judge.coverage import profile_call
from kernelcraft.judge.launches import LaunchCounter
from kernelcraft.judge.timing import Clock
from kernelcraft.tasks.hgemm import Shape, parse_shapes

SPIN = "while True: pass"
CUDA_INIT = "import torch; torch.ones(1 << 20, device='cuda').sum().item()"
GPU_WORK = ("import torch\nx = torch.ones(1 << 16, device='cuda')\n"
            "while True:\n    for _ in range(100): x.mul_(1.0)\n    torch.cuda.synchronize()")


@contextmanager
def load(kind: str) -> Iterator[None]:
    """Run `kind` of neighbour in other processes for the duration of the block."""
    if kind == "quiet":
        yield
        return
    if kind == "profiled":
        a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        profile_call(torch.matmul, [a, a], LaunchCounter(), torch.device("cuda"))
        yield
        return
    if kind == "cpu":
        scripts = [SPIN] * max(1, (os.cpu_count() or 2) - 1)
    elif kind == "gpu_work":
        scripts = [GPU_WORK]
    else:
        lane = f"while True:\n    import subprocess, sys\n    subprocess.run([sys.executable, '-c', {CUDA_INIT!r}])"
        scripts = [lane, lane]
    procs = [subprocess.Popen([sys.executable, "-c", s], start_new_session=True) for s in scripts]
    try:
        time.sleep(3.0)  # the neighbours are up (interpreters started, contexts made) before timing
        yield
    finally:
        for p in procs:
            os.killpg(p.pid, 9)
            p.wait()


def time_matmul(shape: Shape, calls: int) -> list[float]:
    m, n, k = shape.m, shape.n, shape.k
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    clock = Clock(torch.device("cuda"), TimingConfig())
    for _ in range(20):
        clock.time_call(torch.matmul, [a, b])
    return [clock.time_call(torch.matmul, [a, b])[0] * 1e3 for _ in range(calls)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="256x64x128,2048x2048x2048")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--loads", default="quiet,cpu,cuda_init,gpu_work,profiled")
    args = ap.parse_args()
    loads = args.loads.split(",")
    loads = [k for k in loads if k != "profiled"] + ["profiled"] * ("profiled" in loads)
    if not torch.cuda.is_available():
        raise SystemExit("timing_contention needs a CUDA device")
    shapes = parse_shapes(args.shapes)
    print(f"torch.matmul under the judge's clock on {torch.cuda.get_device_name()}, {args.calls} calls; us: median (q1-q3)")
    print(f"{'load':<10} " + " ".join(f"{f'{s.m}x{s.n}x{s.k}':>24}" for s in shapes))
    for kind in loads:
        cells = []
        with load(kind):
            for s in shapes:
                xs = sorted(time_matmul(s, args.calls))
                q1, q3 = xs[len(xs) // 4], xs[3 * len(xs) // 4]
                cells.append(f"{statistics.median(xs):8.1f} ({q1:6.1f}-{q3:6.1f})")
        print(f"{kind:<10} " + " ".join(f"{c:>24}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
