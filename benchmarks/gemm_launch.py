"""Where a small GEMM's time goes under the judge's clock: host launch paths against torch.matmul.

The judge times one call from an idle device (L2 flushed, device synchronised before the start event and
before the end event), so the host work of a call (Python, argument binding, descriptor building) is
counted in full. This benchmark times, per shape and under that same clock:
  clock     a call that does nothing (the clock's own floor)
  matmul    torch.matmul
  jit       a Triton pointer kernel launched through `kernel[grid](...)`
  runner    the same compiled kernel launched through its cached low-level runner
  tma       a Triton TMA kernel, host descriptors built on every call
  tma_pre   the same, the inputs' descriptors cached by (address, shape, strides) (a cached descriptor
            holds its tensor, so the output's, made per call, is not cached)
  tmpl      the template strategy's candidate (`gemm_templates.render`), Triton's runner
  tmpl_cpp  the same candidate as judged: after a shape's first call, its kernels launched from C++
  counted   tmpl_cpp with the judge's launch counter wrapped around its extension's functions
  tmpl_tma  the template's descriptor (TMA) variant, same tiles: descriptors made per call, Triton's launcher
  cutlass   with --cutlass on Hopper: the CUTLASS template's candidate (cooperative 128x256 tile, 2x1
            cluster, the configuration that won most CUTLASS shapes), built with nvcc when first called
Every call runs under torch.no_grad(), as the judge's timed calls do; after its timing each path is
checked once more on new inputs, at other addresses (a path that kept the first call's would fail).
With --verdicts, the judge then evaluates the tmpl_cpp candidate (and with --cutlass the CUTLASS one) on
each shape's hgemm task: its own medians and speedup, taken in a sandboxed worker, sit next to the
in-process numbers above (what the worker adds, if anything).

    python benchmarks/gemm_launch.py --shapes 64x64x64,256x256x256,1024x1024x1024 --verdicts
    python benchmarks/gemm_launch.py --shapes 8192x1024x8192,12288x4096x2048 --cutlass
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import torch
import triton
import triton.language as tl

from kernelbench_style import module_from_source  # a sibling script: benchmarks run as `python benchmarks/X.py`
from kernelcraft.judge import Judge, TimingConfig
from kernelcraft.judge.worker.launches import LaunchCounter
from kernelcraft.judge.worker.timing import Clock
from kernelcraft.search.gemm_cutlass import CutlassConfig, cutlass_include_dirs, render_cutlass
from kernelcraft.search.gemm_templates import GemmConfig, render
from kernelcraft.tasks.hgemm import Shape, hgemm_task, parse_shapes


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0) // tl.cdiv(N, BN)
    pid_n = tl.program_id(0) % tl.cdiv(N, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k0 + rk)[None, :] * sak, mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn, mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _gemm_tma(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0) // tl.cdiv(N, BN)
    pid_n = tl.program_id(0) % tl.cdiv(N, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pid_m * BM, k * BK]), b_desc.load([k * BK, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


def _tiles(m: int, n: int, k: int) -> tuple[int, int, int]:
    return (64, 64, 32) if m * n <= 512 * 512 else (128, 128, 64)


def paths() -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    from triton.tools.tensor_descriptor import TensorDescriptor

    runners: dict[Any, Any] = {}
    descriptors: dict[Any, Any] = {}

    def clock(a, b):
        return a

    def jit(a, b):
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = _tiles(m, n, k)
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
        _gemm[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0),
                                                          b.stride(1), c.stride(0), c.stride(1), BM=bm, BN=bn, BK=bk)
        return c

    def runner(a, b):
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = _tiles(m, n, k)
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
        args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        key = (m, n, k)
        run = runners.get(key)
        if run is None:
            grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), 1, 1)
            compiled = _gemm[grid](*args, BM=bm, BN=bn, BK=bk)
            runners[key] = compiled[grid]
            return c
        run(*args, bm, bn, bk)
        return c

    def tma(a, b, cache: bool = False):
        (m, k), n = a.shape, b.shape[1]
        bm, bn, bk = _tiles(m, n, k)
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)

        def desc(t, block):
            if not cache:
                return TensorDescriptor.from_tensor(t, block)
            key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), tuple(block))
            d = descriptors.get(key)
            if d is None:
                d = descriptors[key] = TensorDescriptor.from_tensor(t, block)
            return d

        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        _gemm_tma[grid](desc(a, [bm, bk]), desc(b, [bk, bn]), TensorDescriptor.from_tensor(c, [bm, bn]), m, n, k,
                        BM=bm, BN=bn, BK=bk)
        return c

    return {"clock": clock, "matmul": torch.matmul, "jit": jit, "runner": runner, "tma": tma,
            "tma_pre": lambda a, b: tma(a, b, cache=True)}


def template_source(m: int, n: int, k: int, variant: str = "tiled") -> str:
    """The template candidate this benchmark times for a shape (one fixed tile rule, not tuned)."""
    return render(GemmConfig(*_tiles(m, n, k), group_m=8, stages=3, warps=4, variant=variant))


def template_paths() -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """The template's candidates, one module per tile size and launch path: Triton's runner, the C++
    launcher, the C++ launcher behind the judge's launch counter."""
    models: dict[Any, Any] = {}

    def model(shape: tuple[int, int, int], path: str) -> Any:
        tiles = _tiles(*shape)
        if (tiles, path) not in models:
            variant = "tma" if path == "tmpl_tma" else "tiled"
            module = module_from_source(template_source(*shape, variant), f"tmpl_{'_'.join(map(str, tiles))}_{path}")
            model = module.ModelNew()
            if path == "tmpl":
                module._NATIVE["module"] = None
            elif path == "counted" and module._NATIVE["module"] is not None:
                # the judge's wrapper around an extension function; on a stand-in, since every template
                # module in this process shares the one launcher extension
                ext = module._NATIVE["module"]
                module._NATIVE["module"] = SimpleNamespace(run=LaunchCounter().wrap("ext:run", ext.run),
                                                           add_plan=ext.add_plan, add_launch=ext.add_launch)
            models[tiles, path] = model
        return models[tiles, path]

    def call(path: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        return lambda a, b: model((a.shape[0], b.shape[1], a.shape[1]), path)(a, b)

    return {path: call(path) for path in ("tmpl", "tmpl_cpp", "counted", "tmpl_tma")}


CUTLASS_PROBE = CutlassConfig(128, 256, 64, 2, 1, "cutlass_cooperative", "persistent", 4)


def cutlass_paths() -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """The CUTLASS template's candidate for the configuration that won most CUTLASS shapes (its
    extension takes every shape); none off Hopper or without CUTLASS's headers."""
    if torch.cuda.get_device_capability() != (9, 0) or cutlass_include_dirs() is None:
        print("cutlass: skipped (needs a Hopper GPU and CUTLASS's headers)")
        return {}
    return {"cutlass": module_from_source(render_cutlass(CUTLASS_PROBE), "cutlass_probe").ModelNew()}


def print_verdicts(shapes: list[Shape], cutlass: bool) -> None:
    """The judge's verdict on each shape's tmpl_cpp candidate (and CUTLASS's), against the hgemm task's reference."""
    judge = Judge("cuda", cache_dir=Path(tempfile.mkdtemp(prefix="kc-launch-")))
    sources: dict[str, Callable[[Shape], str]] = {"tmpl_cpp": lambda s: template_source(s.m, s.n, s.k)}
    if cutlass:
        sources["cutlass"] = lambda s: render_cutlass(CUTLASS_PROBE)
    print(f"\n{'shape':>16} {'path':>8} {'status':>9} {'kernel us':>9} {'ref us':>9} {'host us':>13} {'speedup':>8} {'band':>12} {'iters':>5} {'ref/alone':>11}  launches (profiled call)")
    try:
        for s, (path, source) in itertools.product(shapes, sources.items()):
            v = judge.evaluate(hgemm_task(s), source(s))
            if v.candidate is None or v.reference is None:
                print(f"{str(s):>16} {path:>8} {v.status.value:>9}  {v.message[:100]}")
                continue
            audit = v.stage("audit")
            calls = (audit.details.get("coverage") or {}).get("calls") if audit else None
            band = f"{v.speedup_band[0]:.2f}-{v.speedup_band[1]:.2f}" if v.speedup_band else "-"
            timing = v.stage("timing").details
            host = timing.get("host_ms") or {}
            host_us = f"{host.get('candidate', 0) * 1000:.1f}/{host.get('reference', 0) * 1000:.1f}"
            # the reference next to the candidate over the one timed alone: raw / with the host's speed accounted
            d = audit.details if audit else {}
            alone = f"{d.get('reference_vs_trusted_raw', 0):.2f}/{d.get('reference_vs_trusted', 0):.2f}"
            print(f"{str(s):>16} {path:>8} {v.status.value:>9} {v.candidate.median_ms * 1000:9.1f} {v.reference.median_ms * 1000:9.1f} "
                  f"{host_us:>13} {v.speedup:7.3f}x {band:>12} {timing.get('iterations', 0):>5} {alone:>11}  {calls}")
    finally:
        judge.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="64x64x64,256x256x256,512x512x512,1024x1024x1024,128x64x16384")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--verdicts", action="store_true", help="Also judge each shape's tmpl_cpp candidate.")
    ap.add_argument("--cutlass", action="store_true", help="Also time the CUTLASS template's candidate (Hopper).")
    args = ap.parse_args()
    torch.set_grad_enabled(False)  # the judge times every call under torch.no_grad()
    dev = torch.device("cuda")
    clock = Clock(dev, TimingConfig())
    fns = {**paths(), **template_paths(), **(cutlass_paths() if args.cutlass else {})}
    native = module_from_source(template_source(64, 64, 64), "tmpl_probe")
    native.ModelNew()
    launcher = "built" if native._NATIVE["module"] is not None else f"unavailable (CUDA_HOME {native.CUDA_HOME})"
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
          f"the template's C++ launcher: {launcher}")
    print("median us per call under the judge's clock (flush, sync, start, call, sync, end); "
          "then, per shape, the host part (start event to the call's return)")
    print(f"{'shape':>16} " + " ".join(f"{n:>9}" for n in fns))
    shapes = parse_shapes(args.shapes)
    for s in shapes:
        a = torch.randn(s.m, s.k, device=dev, dtype=torch.float16)
        b = torch.randn(s.k, s.n, device=dev, dtype=torch.float16)
        ref = torch.matmul(a, b)
        row, host = [], []
        for name, fn in fns.items():
            for _ in range(5):
                out = fn(a, b)
            if name != "clock":
                torch.testing.assert_close(out, ref, atol=2e-1, rtol=2e-2)
            ms, host_ms = [], []
            for _ in range(args.iters):
                ms.append(clock.time_call(fn, [a, b])[0])
                host_ms.append(clock.host_ms)
            if name != "clock":
                a2, b2 = torch.randn_like(a), torch.randn_like(b)
                torch.testing.assert_close(fn(a2, b2), torch.matmul(a2, b2), atol=2e-1, rtol=2e-2)
            row.append(statistics.median(ms) * 1000)
            host.append(statistics.median(host_ms) * 1000)
        print(f"{s.m}x{s.n}x{s.k}".rjust(16) + " " + " ".join(f"{v:9.1f}" for v in row))
        print("host".rjust(16) + " " + " ".join(f"{v:9.1f}" for v in host))
    if args.verdicts:
        print_verdicts(shapes, args.cutlass)


if __name__ == "__main__":
    main()
