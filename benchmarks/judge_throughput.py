"""Judge throughput: 20+ honest candidates through kernelcraft's local pool (isolated workers,
parallel builds, per-device timing lock) against the one-process, one-at-a-time way the
KernelBench harness evaluates them. Both start with cold build caches. With --profile, the cost of
the hardware feedback `optimize` adds: every correct candidate profiled after the pool (ncu where it
runs, else the PyTorch profiler), one at a time, as optimize does after each correct verdict.
Target: the pool at least 3x the one-process harness's throughput, and at most 3 s of isolation
overhead per candidate.

    python benchmarks/judge_throughput.py --device cuda --workers 8 --out $OUT [--profile]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import throughput_jobs  # noqa: E402

from kernelcraft.judge import Job, KernelProfiler, LocalPool  # noqa: E402

STAGES = ("build", "load", "correctness", "timing", "audit")


def run_pool(jobs, device: str, workers: int, cache: Path) -> tuple[float, list]:
    t0 = time.perf_counter()
    with LocalPool(device, cache_dir=cache, workers=workers) as pool:
        results = list(pool.map([Job(j.task, j.source, tag=j.label) for j in jobs]))
    return time.perf_counter() - t0, results


def profile_cost(results: list, device: str, cache: Path) -> list[dict]:
    """Each correct candidate's profile (from the pool's build cache): its tool and wall time."""
    profiler = KernelProfiler(device, cache_dir=cache)
    rows = []
    for r in results:
        if r.verdict is not None and r.verdict.correct:
            p = profiler.profile(r.job.task, r.job.source)
            rows.append({"job": r.job.tag, "tool": p.tool, "seconds": p.seconds, "note": p.note, "kernels": len(p.kernels)})
    return rows


def run_naive(jobs, out_dir: Path) -> tuple[float, list]:
    spec = [{"task_source": j.task.source, "sizes": j.task.sizes_for("cuda"), "candidate_source": j.source} for j in jobs]
    jobs_file, res_file = out_dir / "naive_jobs.json", out_dir / "naive_results.json"
    jobs_file.write_text(json.dumps(spec))
    fresh = Path(tempfile.mkdtemp(prefix="kc-naive-"))
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(fresh / "ext"), "TRITON_CACHE_DIR": str(fresh / "triton")}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(Path(__file__).parent / "kernelbench_style.py"), str(jobs_file), str(res_file)],
                   env=env, check=True)
    return time.perf_counter() - t0, json.loads(res_file.read_text())


def hang_stall(args: argparse.Namespace) -> None:
    """A pool of `--workers` judging the honest candidates next to one that hangs in its kernel: how long
    the hung one held the device (its correctness command, killed at the timeout the reference's time
    gives it) and how long the others waited for the device lock, against the stage timeout it had before."""
    from kernelcraft.judge import JudgeConfig
    from kernelcraft.tasks import resolve_task
    jobs = [Job(j.task, j.source, tag=j.label) for j in throughput_jobs()]
    hung = Job(resolve_task("leaky_relu_clamp"), (Path(__file__).parent / "candidates" / "hang_cuda.py").read_text(), tag="hung")
    cache = Path(tempfile.mkdtemp(prefix="kc-bench-cache-"))
    t0 = time.perf_counter()
    with LocalPool(args.device, cache_dir=cache, workers=args.workers) as pool:
        results = {r.job.tag: r for r in pool.map([hung] + jobs)}
    wall = time.perf_counter() - t0
    v = results["hung"].verdict
    held = v.stage("correctness").seconds if v and v.stage("correctness") else None
    waits = [r.verdict.stage("timing").details.get("lock_wait_s", 0.0) for tag, r in results.items()
             if tag != "hung" and r.verdict and r.verdict.stage("timing")]
    ok = sum(1 for tag, r in results.items() if tag != "hung" and r.verdict and r.verdict.correct)
    row = {"hung_status": v.status.value if v else None, "hung_message": v.message if v else results["hung"].error,
           "hung_held_device_s": held, "others_correct": ok, "others": len(jobs), "others_max_lock_wait_s": max(waits, default=None),
           "wall_s": wall, "stage_timeout_before_s": JudgeConfig().timeouts.correctness,
           "device_name": v.env.get("device_name") if v else None}
    (args.out / "hang_stall.json").write_text(json.dumps(row, indent=1))
    print(f"\none hung candidate among {len(jobs)} honest ones, {args.workers} workers, on {row['device_name']}:")
    print(f"hung candidate: {row['hung_status']} after holding the device {held:.1f} s (the stage timeout was "
          f"{row['stage_timeout_before_s']:.0f} s); {ok}/{len(jobs)} others correct; longest wait of another for the "
          f"device lock {row['others_max_lock_wait_s']:.1f} s; pool wall {wall:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--profile", action="store_true", help="Also profile every correct candidate after the pool: the cost "
                                                             "of optimize's feedback from the hardware.")
    ap.add_argument("--hang", action="store_true", help="Only the stall one hung candidate causes the pool: the honest "
                                                          "candidates and one whose kernel never returns, together.")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.hang:
        hang_stall(args)
        return
    jobs = throughput_jobs()
    naive_s, naive = (None, []) if args.skip_naive else run_naive(jobs, args.out)
    cache = Path(tempfile.mkdtemp(prefix="kc-bench-cache-"))
    pool_s, results = run_pool(jobs, args.device, args.workers, cache)
    profiles = profile_cost(results, args.device, cache) if args.profile else []

    order = {j.label: i for i, j in enumerate(jobs)}
    results.sort(key=lambda r: order[r.job.tag])  # the pool returns them as they finish
    t_start = min(r.started for r in results)
    lines = []
    for r in results:
        v = r.verdict
        lines.append({"job": r.job.tag, "status": v.status.value if v else "task_error", "message": (v.message if v else r.error)[:200],
                      "speedup": v.speedup if v else None, "device_name": v.env.get("device_name") if v else None,
                      "stages": {s.name: s.seconds for s in v.stages} if v else {},
                      "spawn_s": (v.stage("load").details.get("spawn_s") if v and v.stage("load") else None),
                      "task_setup_s": (v.stage("load").details.get("task_setup_s") if v and v.stage("load") else None),
                      "lock_wait_s": (v.stage("timing").details.get("lock_wait_s") if v and v.stage("timing") else None),
                      "timing_phases_s": (v.stage("timing").details.get("phases_s") if v and v.stage("timing") else None),
                      "started_s": r.started - t_start, "finished_s": r.finished - t_start})
    (args.out / "throughput.json").write_text(json.dumps({"pool_s": pool_s, "naive_s": naive_s, "workers": args.workers,
                                                          "results": lines, "naive": naive, "profiles": profiles}, indent=1))
    n = len(jobs)
    device_name = next((x["device_name"] for x in lines if x["device_name"]), "?")
    print(f"\njudge throughput on {device_name}, {n} candidates, {args.workers} workers")
    print(f"{'job':60s} {'status':14s} {'speedup':>8s} {'naive':>8s}  (naive: one process, no L2 flush, same inputs)")
    for x, nv in zip(lines, naive or [{}] * n):
        sp = f"{x['speedup']:.2f}x" if x["speedup"] else "-"
        ns = f"{nv['speedup']:.2f}x" if nv.get("speedup") else ("ok" if nv.get("correct") else nv.get("error", "-")[:8])
        print(f"{x['job'][:60]:60s} {x['status']:14s} {sp:>8s} {ns:>8s}")
    per_stage = {s: statistics.mean(x["stages"].get(s, 0.0) for x in lines) for s in STAGES}
    spawns = sorted(x["spawn_s"] for x in lines if x["spawn_s"] is not None)
    overheads = sorted(x["spawn_s"] - (x["task_setup_s"] or 0.0) for x in lines if x["spawn_s"] is not None)
    waits = [x["lock_wait_s"] for x in lines if x["lock_wait_s"] is not None]
    if waits:
        print(f"waiting for the device lock before timing: mean {statistics.mean(waits):.2f} s, max {max(waits):.2f} s")
    print("\nmean seconds per candidate and stage: " + ", ".join(f"{s} {t:.2f}" for s, t in per_stage.items()))
    if spawns:
        print(f"a candidate's wait for its worker and task setup: median {statistics.median(spawns):.2f} s, max {spawns[-1]:.2f} s")
        print(f"isolation overhead (that wait less the task's own setup, which one process does too: process start, "
              f"imports and CUDA init unless a warm spare was ready): median {statistics.median(overheads):.2f} s, "
              f"max {overheads[-1]:.2f} s (target <= 3 s)")
    print(f"\n{'mode':34s} {'wall s':>8s} {'verdicts/min':>13s}")
    print(f"{'kernelcraft LocalPool':34s} {pool_s:8.1f} {60 * n / pool_s:13.1f}")
    if naive_s:
        print(f"{'one process, one at a time':34s} {naive_s:8.1f} {60 * n / naive_s:13.1f}")
        print(f"throughput ratio: {naive_s / pool_s:.2f}x (target >= 3x)")
    if profiles:
        secs = sorted(p["seconds"] for p in profiles)
        tools = ", ".join(sorted({p["tool"] or "failed" for p in profiles}))
        print(f"hardware profiles of the {len(profiles)} correct candidates ({tools}), one at a time after their verdicts: "
              f"median {statistics.median(secs):.1f} s, max {secs[-1]:.1f} s, total {sum(secs):.1f} s "
              f"({sum(secs) / pool_s:.0%} of the pool's wall time for all {n} verdicts)")


if __name__ == "__main__":
    main()
