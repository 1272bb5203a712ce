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
  idle_contexts     eight processes holding a CUDA context each and sleeping (a judge pool's workers)
  stopped_contexts  the same eight, stopped (SIGSTOP), as the judge leaves its other workers while one is timed
  profiled    no neighbour: this process ran the judge's coverage profile (torch.profiler with CUDA
              activity) once before; it runs last, since a process cannot be un-profiled

With --per-cpu, the quiet measurement is then taken pinned to each CPU in turn, twice, next to the
host probe's time there (does the vCPU a measurement lands on decide its speed, and does the probe
tell the fast ones?).

    python benchmarks/timing_contention.py --shapes 256x64x128,4096x4096x4096
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import torch

from kernelcraft.judge import TimingConfig
from kernelcraft.judge.worker.coverage import profile_call
from kernelcraft.judge.worker.launches import LaunchCounter
from kernelcraft.judge.worker.timing import Clock, host_probe
from kernelcraft.tasks.hgemm import Shape, parse_shapes

SPIN = "while True: pass"
CUDA_INIT = "import torch; torch.ones(1 << 20, device='cuda').sum().item()"
IDLE_CONTEXT = CUDA_INIT + "\nimport time\nwhile True: time.sleep(1)"
CONTEXTS = 8
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
    elif kind in ("idle_contexts", "stopped_contexts"):
        scripts = [IDLE_CONTEXT] * CONTEXTS
    elif kind == "gpu_work":
        scripts = [GPU_WORK]
    else:
        lane = f"while True:\n    import subprocess, sys\n    subprocess.run([sys.executable, '-c', {CUDA_INIT!r}])"
        scripts = [lane, lane]
    procs = [subprocess.Popen([sys.executable, "-c", s], start_new_session=True) for s in scripts]
    try:
        time.sleep(3.0 if kind != "stopped_contexts" else 8.0)  # the neighbours are up (contexts made) before timing
        if kind == "stopped_contexts":
            for p in procs:
                os.killpg(p.pid, signal.SIGSTOP)
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


def cell(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{statistics.median(xs):8.1f} ({xs[len(xs) // 4]:6.1f}-{xs[3 * len(xs) // 4]:6.1f})"


def per_cpu(shape: Shape, calls: int) -> None:
    """The quiet measurement pinned to each CPU in turn, two passes, with the host probe there."""
    cpus = sorted(os.sched_getaffinity(0))
    rows: dict[int, list[str]] = {c: [] for c in cpus}
    try:
        for _ in range(2):
            for c in cpus:
                os.sched_setaffinity(0, {c})
                probe = statistics.median(host_probe() for _ in range(50)) * 1e3
                rows[c] += [cell(time_matmul(shape, calls)), f"{probe:6.1f}"]
    finally:
        os.sched_setaffinity(0, cpus)
    print(f"\npinned to one CPU, {shape.m}x{shape.n}x{shape.k}: us, median (q1-q3), and the host probe (us), two passes")
    for c in cpus:
        print(f"cpu {c:<6} " + "  ".join(rows[c]), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="256x64x128,2048x2048x2048")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--loads", default="quiet,cpu,cuda_init,gpu_work,profiled")
    ap.add_argument("--per-cpu", action="store_true", help="Then time the first shape pinned to each CPU in turn.")
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
                cells.append(cell(time_matmul(s, args.calls)))
        print(f"{kind:<10} " + " ".join(f"{c:>24}" for c in cells), flush=True)
    if args.per_cpu:
        per_cpu(shapes[0], args.calls)


if __name__ == "__main__":
    main()
