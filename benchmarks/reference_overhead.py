"""Where a short call's time goes: the same task's reference timed by the judge's own clock (worker/timing.Clock)
in three places, host time (until `forward` returned) and timed time (between the call's CUDA events, or on the
host on the CPU):

- bare: a loop in this process, back to back, nothing else running;
- trusted: the trusted worker's time of the reference alone (`trusted_reference`, what `slowed_reference` compares
  against);
- next to the candidate: the reference timed ABAB next to a candidate in the candidate's sandboxed worker. The
  candidate is the reference itself (`Judge.self_check`), so both sides run the same call.

On 2xH200 (twenty-seventh session) torch.matmul took about 25 us more per call next to the candidate than in the
trusted worker, at every size. Under 0.1 ms that is 1.5x, and 37 of 43 honest verdicts were flagged
`slowed_reference`. This table says where the extra time arises. `--busy 0,16` measures everything again with 16 processes spinning
on the host's CPUs, as a pool's nvcc builds keep them busy beside the timed calls.

A second table times the bare loop again with something between the calls, as the candidate's rounds have:
a pipe round-trip to another process (the judge answering a request), or the host idle for 200 us. On 4xH200
(twenty-eighth session) a 128x1024x128 matmul took 34 us back to back and 77 us after a 200 us sleep. Its other
columns put another call, synchronized, before each, as the candidate's call precedes the reference's in an ABAB
round: the reference itself, a small Triton kernel (CUDA only), and B's column-major copy (what CUDA-L2's wrapper
makes). On one H100 (twenty-ninth session) the reference ran 1.30-1.58x slower next to 27 honest short kernels, of
both sets, than next to itself; these columns say whether a call of another kind before it is enough.

A third table runs the judge's own rounds (worker/timing.run_interleaved: fresh inputs each round, then the
first side, then the second) with a candidate of another kind that does the reference's work: B's column-major copy
then torch.matmul (the shape of CUDA-L2's wrapper), and the template search's first Triton kernel for the shape (CUDA
only). As judged, the candidate runs first and the reference right after it; the control runs the reference then
itself; a third pairing runs the candidate then itself. The flag's ratio is the reference after the candidate over
the reference after itself. If the candidate, first in its rounds after the input copies, runs as much slower than
after itself, the order costs both sides alike, and a flagged verdict's credit (the reference after itself over the
candidate first) understates it. The control's first slot (mm/-: the reference after the input copies, where the
candidate runs) compares the two sides in the same position.

    python benchmarks/reference_overhead.py --device cuda --busy 0,16 --out $OUT
    python benchmarks/reference_overhead.py --device cpu --shapes 64x64x64     # checks the script, not the question
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU machine: no Triton column
    triton = None

from kernelcraft.judge import Judge, JudgeConfig, describe_device
from kernelcraft.judge.worker.timing import Clock, local_rounds, run_interleaved
from kernelcraft.kernels.gemm import DeviceCaps, config_space, render_config
from kernelcraft.tasks import Shape, Task, hgemm_task, parse_shapes
from kernelcraft.tasks.runtime import build_model, exec_module, make_init_inputs, make_inputs, torch_dtype

CUDA_SHAPES = "256x1024x64,128x1024x128,4096x2048x1024,8192x8192x4096"


def _loaded(task: Task, device: torch.device) -> tuple[torch.nn.Module, list, Clock]:
    """The task's Model and inputs in this process, warmed up, and the judge's clock."""
    module = exec_module(task.source, "task.py", "task")
    dtype = torch_dtype(task.meta.dtype)
    model = build_model(module.Model, make_init_inputs(module), 0, device, dtype)
    xs = make_inputs(module, 0, device, dtype)
    with torch.no_grad():
        for _ in range(20):
            model(*xs)
    return model, xs, Clock(device, JudgeConfig().timing)


def _timed(model: torch.nn.Module, xs: list, clock: Clock, calls: int,
           between: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Median timed and host ms of `calls` calls by the judge's clock, `between` run before each."""
    timed, host = [], []
    with torch.no_grad():
        for _ in range(calls):
            between()
            ms, out = clock.time_call(model, xs)
            timed.append(ms)
            host.append(clock.host_ms)
            del out
    return {"timed_ms": statistics.median(timed), "host_ms": statistics.median(host)}


def bare(task: Task, device: torch.device, calls: int) -> dict[str, float]:
    """The task's Model timed in this process by the judge's clock, back to back: median timed and host ms."""
    return _timed(*_loaded(task, device), calls)


def _echo() -> subprocess.Popen:
    """A process that answers each byte with a byte, as the judge answers a round's request."""
    return subprocess.Popen([sys.executable, "-c", "import os\nwhile os.write(1, os.read(0, 1)): pass"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)


if triton is not None:
    @triton.jit
    def _add_one(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)


def _synced(fn: Callable[[], object], device: torch.device) -> Callable[[], None]:
    """`fn`, then wait for the device, as the judge's clock waits for a side's call before the next side's."""
    def call() -> None:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return call


def _others(model: torch.nn.Module, xs: list, device: torch.device) -> dict[str, Callable[[], None] | None]:
    """Calls of another kind to put before each of the reference's: itself, a Triton kernel, B's column-major copy."""
    others: dict[str, Callable[[], None] | None] = {"after itself": _synced(lambda: model(*xs), device)}
    if triton is not None and device.type == "cuda":
        x = torch.zeros(4096, device=device)
        others["after Triton"] = _synced(lambda: _add_one[(4,)](x, x.numel(), BLOCK=1024), device)
        others["after Triton"]()  # compiled here, outside the timed loop
    else:
        others["after Triton"] = None
    others["after B copy"] = _synced(lambda: xs[1].t().contiguous(), device)
    return others


def paced(task: Task, device: torch.device, calls: int) -> dict[str, float | None]:
    """The bare loop's median timed ms with each call preceded by nothing, a pipe round-trip, 200 us idle, or a
    synchronized call of another kind (_others; None where it cannot run here)."""
    loaded = _loaded(task, device)
    echo = _echo()

    def round_trip() -> None:
        echo.stdin.write(b"x")
        echo.stdout.read(1)

    modes = {"back to back": lambda: None, "round-trip": round_trip, "sleep 200 us": lambda: time.sleep(2e-4),
             **_others(loaded[0], loaded[1], device)}
    try:  # _timed runs each mode, `between` included, without autograd
        return {name: _timed(*loaded, calls, between)["timed_ms"] if between else None for name, between in modes.items()}
    finally:
        echo.kill()
        echo.wait()


def _same_work(shape: Shape, device: torch.device) -> dict[str, torch.nn.Module | Callable[..., torch.Tensor] | None]:
    """Candidates of another kind that do the reference's work: B's column-major copy, then torch.matmul; and the
    template search's first Triton kernel for `shape` (None where Triton or a GPU is missing)."""
    kinds: dict[str, torch.nn.Module | Callable[..., torch.Tensor] | None] = {
        "B copy + mm": lambda a, b: torch.matmul(a, b.t().contiguous().t())}
    if triton is not None and device.type == "cuda":
        source = render_config(config_space(shape, DeviceCaps.of(describe_device("cuda")))[0])
        path = Path(tempfile.mkdtemp(prefix="kc-overhead-cand-")) / "candidate.py"
        path.write_text(source)  # @triton.jit reads its function's source back from the file, as in the worker
        kinds["Triton template"] = exec_module(source, str(path), "candidate").ModelNew().to(device)
    else:
        kinds["Triton template"] = None
    return kinds


def _rounds(first: Callable[..., object], second: Callable[..., object], sets: list[list], clock: Clock) -> tuple[float, float]:
    """The median timed ms of `first` and `second` in the judge's own rounds (worker/timing.run_interleaved: each
    round makes fresh inputs from one of `sets`, times `first`, then `second`), without its requests and spot checks."""
    samples = run_interleaved([("candidate", first), ("reference", second)], sets, clock, JudgeConfig().timing,
                              local_rounds(len(sets)), lambda *_: None)
    return statistics.median(samples["candidate"]), statistics.median(samples["reference"])


def alternating(shape: Shape, device: torch.device) -> dict[str, dict[str, float] | None]:
    """Per candidate kind (_same_work), the judge's rounds three ways: the candidate then the reference (as judged),
    the reference then itself (the control) and the candidate then itself: each side's median timed ms in the first
    slot (after the round's input copies) and the second (right after the first side's call)."""
    task = hgemm_task(shape)
    model, xs, clock = _loaded(task, device)
    module = exec_module(task.source, "task.py", "task")
    sets = [xs] + [make_inputs(module, seed, device, torch_dtype(task.meta.dtype)) for seed in (1, 2)]
    out: dict[str, dict[str, float] | None] = {}
    for kind, cand in _same_work(shape, device).items():
        if cand is None:
            out[kind] = None
            continue
        with torch.no_grad():
            cand_first, ref_after_cand = _rounds(cand, model, sets, clock)
            ref_first, ref_after_ref = _rounds(model, model, sets, clock)
            cand_first_alone, cand_after_cand = _rounds(cand, cand, sets, clock)
        out[kind] = {"cand_first": cand_first, "ref_after_cand": ref_after_cand, "ref_first": ref_first,
                     "ref_after_ref": ref_after_ref, "cand_first_alone": cand_first_alone,
                     "cand_after_cand": cand_after_cand}
    return out


@contextmanager
def busy_host(n: int) -> Iterator[None]:
    """`n` processes spinning on the host's CPUs while the body runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def measure(judge: Judge, task: Task, device: torch.device, calls: int, busy: int) -> dict | None:
    """One shape's row: the reference in a bare loop, in the trusted worker and next to itself as the candidate."""
    with busy_host(busy):
        b = bare(task, device, calls)
        v = judge.self_check(task)
    if v.reference is None or v.trusted_reference is None:
        print(f"{task.key} (busy {busy}): {v.status.value}: {v.message[:200]}", flush=True)
        return None
    return {"shape": task.key.split("/")[-1], "busy": busy, "status": v.status.value, "bare": b,
            "trusted": {"timed_ms": v.trusted_reference.median_ms, "host_ms": v.trusted_reference.host_ms},
            "next_to_candidate": {"timed_ms": v.reference.median_ms, "host_ms": v.reference.host_ms},
            "flags": sorted({f.code for f in v.flags})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--shapes", default=CUDA_SHAPES, help="hgemm shapes, MxNxK,...")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--busy", default="0", help="Spinning host processes during the measurements: one run per level, "
                                                 "e.g. 0,16.")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    rows = []
    for busy in [int(x) for x in args.busy.split(",")]:
        # a judge of its own per level: the trusted time is kept per task, and must be taken at this level
        judge = Judge(args.device, cache_dir=Path(tempfile.mkdtemp(prefix="kc-overhead-")))
        try:
            for shape in parse_shapes(args.shapes):
                row = measure(judge, hgemm_task(shape), device, args.calls, busy)
                if row is not None:
                    rows.append(row)
        finally:
            judge.close()
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    us = lambda x: f"{x * 1000:8.1f}" if x is not None else "       -"  # noqa: E731
    print(f"\n{name}: the reference's median per call, us (timed / host)")
    print(f"{'shape':<18}{'busy':>5}{'bare':>20}{'trusted':>20}{'next to candidate':>22}  flags")
    for r in rows:
        cells = [f"{us(r[k]['timed_ms'])} /{us(r[k]['host_ms'])}" for k in ("bare", "trusted", "next_to_candidate")]
        print(f"{r['shape']:<18}{r['busy']:>5}{cells[0]:>20}{cells[1]:>20}{cells[2]:>22}  {','.join(r['flags'])}")
    pacing = {shape: paced(hgemm_task(shape), device, args.calls) for shape in parse_shapes(args.shapes)}
    print(f"\n{name}: the bare loop's median per call, us, by what runs between calls")
    print(f"{'shape':<18}" + "".join(f"{m:>16}" for m in next(iter(pacing.values()))))
    for shape, row in pacing.items():
        print(f"{str(shape):<18}" + "".join(f"{us(ms):>16}" for ms in row.values()))
    alternation = {shape: alternating(shape, device) for shape in parse_shapes(args.shapes)}
    print(f"\n{name}: the judge's rounds (the first side after the round's input copies, the second right after the "
          "first's call), median us, x/y: x second after y, x/- x first. The candidate's speedup: as measured (mm/cand "
          "over cand/-), as judge 15 credits a flagged verdict (mm/mm over cand/-), with the reference in the "
          "candidate's slot (mm/- over cand/-), and each side after itself (mm/mm over cand/cand)")
    print(f"{'shape':<18}{'candidate':<17}{'cand/-':>8}{'mm/cand':>9}{'mm/-':>8}{'mm/mm':>8}{'cand/cand':>10}"
          f"{'flag ratio':>11}{'measured':>9}{'credited':>9}{'same slot':>10}{'alike':>7}")
    for shape, kinds in alternation.items():
        for kind, t in kinds.items():
            if t is None:
                print(f"{str(shape):<18}{kind:<17}  (cannot run here)")
                continue
            cand = t["cand_first"]
            print(f"{str(shape):<18}{kind:<17}{us(cand):>8}{us(t['ref_after_cand']):>9}{us(t['ref_first']):>8}"
                  f"{us(t['ref_after_ref']):>8}{us(t['cand_after_cand']):>10}{t['ref_after_cand'] / t['ref_after_ref']:>11.2f}"
                  f"{t['ref_after_cand'] / cand:>9.2f}{t['ref_after_ref'] / cand:>9.2f}{t['ref_first'] / cand:>10.2f}"
                  f"{t['ref_after_ref'] / t['cand_after_cand']:>7.2f}")
    (args.out / "reference_overhead.json").write_text(json.dumps({
        "device": name, "rows": rows, "pacing": {str(k): v for k, v in pacing.items()},
        "alternation": {str(k): v for k, v in alternation.items()}}, indent=1))


if __name__ == "__main__":
    main()
