"""What the sandbox costs: a worker's start (cold: a fresh process to its first answer, CUDA context
included), one evaluation cold (a new judge: its trusted worker, a worker started for the candidate)
and warm (the task's trusted worker kept, a spare worker waiting), and the pool's throughput over
the throughput benchmark's candidates, each with the sandbox on and off (KERNELCRAFT_SANDBOX=off),
in one call, with cold build caches on both sides. Target: at most 10% lower throughput with the sandbox
on, and every candidate's verdict the same either way.

    python benchmarks/sandbox_cost.py --device cuda --out $OUT
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

from kernelcraft.judge import Job, Judge, LocalPool  # noqa: E402
from kernelcraft.judge.isolation import SWITCH_ENV, isolation  # noqa: E402
from kernelcraft.judge.worker_process import WorkerProcess  # noqa: E402

STARTS = 8


def worker_starts(device: str, cache: Path) -> list[float]:
    """Seconds from starting a worker to its first answer (a setup without a task), one at a time."""
    times = []
    for _ in range(STARTS):
        t0 = time.perf_counter()
        with WorkerProcess(device, 0, cache) as w:
            w.call({"op": "setup", "role": "candidate", "device": device, "config": {}, "dtype": "float32", "atol": 1e-4,
                    "rtol": 1e-4, "init_seed": 0, "cache_dir": str(cache), "task_source": None, "sizes": {}}, timeout=300)
            times.append(time.perf_counter() - t0)
    return times


def evaluations(device: str, cache: Path) -> dict[str, float]:
    """Wall seconds of one evaluation on a new judge (cold), then of a second candidate of the same
    task once a spare worker waits (warm)."""
    jobs = [j for j in throughput_jobs() if "triton" in j.source][:2]
    judge = Judge(device, cache_dir=cache, spare_workers=1)
    try:
        t0 = time.perf_counter()
        judge.evaluate(jobs[0].task, jobs[0].source)
        cold = time.perf_counter() - t0
        time.sleep(5)  # the spare worker warms up
        t0 = time.perf_counter()
        judge.evaluate(jobs[0].task, jobs[1].source if jobs[1].task.key == jobs[0].task.key else jobs[0].source + "\n")
        warm = time.perf_counter() - t0
    finally:
        judge.close()
    return {"cold_s": cold, "warm_s": warm}


def throughput(device: str, cache: Path, workers: int) -> dict[str, object]:
    jobs = throughput_jobs()
    t0 = time.perf_counter()
    with LocalPool(device, cache_dir=cache, workers=workers) as pool:
        results = list(pool.map([Job(j.task, j.source, tag=j.label) for j in jobs]))
    wall = time.perf_counter() - t0
    statuses = [r.verdict.status.value if r.verdict else "task_error" for r in results]
    device_name = next((r.verdict.env.get("device_name") for r in results if r.verdict), "?")
    return {"pool_s": wall, "jobs": len(jobs), "correct": statuses.count("correct"), "statuses": statuses,
            "device_name": device_name}


def child(args: argparse.Namespace) -> None:
    iso = isolation()
    row: dict[str, object] = {"sandbox": iso.enabled, "isolation": iso.describe()}
    row["starts_s"] = worker_starts(args.device, Path(tempfile.mkdtemp(prefix="kc-sbx-")))
    row.update(evaluations(args.device, Path(tempfile.mkdtemp(prefix="kc-sbx-"))))
    if not args.skip_throughput:
        row.update(throughput(args.device, Path(tempfile.mkdtemp(prefix="kc-sbx-")), args.workers))
    print(json.dumps(row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for mode in ("off", "on"):
        env = {**os.environ, SWITCH_ENV: mode}
        argv = [sys.executable, __file__, "--child", "--device", args.device, "--workers", str(args.workers)]
        r = subprocess.run(argv + (["--skip-throughput"] if args.skip_throughput else []), env=env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"sandbox {mode}: {r.stderr.strip()[-2000:]}")
        rows[mode] = json.loads(r.stdout.strip().splitlines()[-1])
        (args.out / "sandbox_cost.json").write_text(json.dumps(rows, indent=1))  # as each side finishes
    off, on = rows["off"], rows["on"]
    print(f"\nsandbox cost on {on.get('device_name', args.device)}; on: {on['isolation']}")
    print(f"{'measure':42s} {'off':>9s} {'on':>9s} {'on/off':>7s}")

    def line(name: str, a: float, b: float) -> None:
        print(f"{name:42s} {a:9.3f} {b:9.3f} {b / a:7.2f}")

    line("worker start, median (s)", statistics.median(off["starts_s"]), statistics.median(on["starts_s"]))
    line("worker start, max (s)", max(off["starts_s"]), max(on["starts_s"]))
    line("evaluation, cold (s)", off["cold_s"], on["cold_s"])
    line("evaluation, warm (s)", off["warm_s"], on["warm_s"])
    if "pool_s" in on:
        line(f"pool, {on['jobs']} candidates, {args.workers} workers (s)", off["pool_s"], on["pool_s"])
        print(f"correct: off {off['correct']}/{off['jobs']}, on {on['correct']}/{on['jobs']}")


if __name__ == "__main__":
    main()
