"""Judge scaling over GPUs: a fixed set of 40 honest candidates (the throughput benchmark's 20, each also as a
second, distinct candidate) judged by LocalPool on one GPU and then on two, by RayPool on one node's two GPUs,
and by the reward service (`serve-judge --gpus 0,1`) under 200 concurrent submissions. Every side starts with
the build cache warm (a kernel compiles once per machine, which the first pass pays), so the ratios measure
judging, not compiling. Targets: 2 GPUs at least 1.8x the verdicts per minute of 1; no submission lost; every
verdict's status the same on every side.

    python benchmarks/judge_scaling.py --out $OUT [--parts local,ray,service] [--workers 8]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import throughput_jobs  # noqa: E402

from kernelcraft.judge import Job, LocalPool, Result  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = 200


def scaling_jobs() -> list[Job]:
    """40 candidates: each of the throughput set as it is, and as a second candidate that differs by a module
    constant (a distinct candidate to every cache of verdicts, the same extension to the build cache)."""
    jobs = []
    for variant in (0, 1):
        for j in throughput_jobs():
            source = j.source if variant == 0 else j.source + "\n_SCALING_VARIANT = 1\n"
            jobs.append(Job(j.task, source, tag=f"{j.label}#{variant}"))
    return jobs


MESSAGES: dict[str, str] = {}  # a message of each status other than correct, for the log


DETAILS: list[dict] = []  # every evaluation: where, when, how long each stage took, the device lock's wait


def detail(side: str, r: Result) -> None:
    v = r.verdict
    DETAILS.append({"side": side, "job": r.job.tag, "started": r.started, "finished": r.finished,
                    "device_index": v.env.get("device_index") if v else None,
                    "device_uuid": v.env.get("device_uuid") if v else None,
                    "speedup": v.speedup if v else None,
                    "stages": {s.name: round(s.seconds, 3) for s in v.stages} if v else {},
                    "stage_began_s": v.resources.get("stage_began_s") if v else None,
                    "wall_s": v.resources.get("wall_s") if v else None,
                    "lock_wait_s": (v.stage("timing").details.get("lock_wait_s") if v and v.stage("timing") else None)})


class Busy:
    """The host's CPUs and each GPU, sampled each second while a side runs: the mean share of CPU time busy
    (/proc/stat) and each GPU's mean utilisation (nvidia-smi), to tell which one a side waited on."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.gpu: dict[str, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _cpu_times() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle and iowait
        return sum(fields) - idle, sum(fields)

    def _run(self) -> None:
        busy0, total0 = self._cpu_times()
        while not self._stop.wait(1.0):
            busy1, total1 = self._cpu_times()
            if total1 > total0:
                self.cpu.append((busy1 - busy0) / (total1 - total0))
            busy0, total0 = busy1, total1
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            for line in out.strip().splitlines():
                index, util = (x.strip() for x in line.split(","))
                self.gpu.setdefault(index, []).append(float(util))

    def __enter__(self) -> "Busy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        mean = lambda xs: round(sum(xs) / len(xs), 3) if xs else None  # noqa: E731
        return {"cpu_busy": mean(self.cpu), "cpu_busy_max": max(self.cpu, default=None),
                "gpu_util": {i: mean([u / 100 for u in us]) for i, us in self.gpu.items()}}


def outcome(r: Result) -> str:
    if r.verdict is None:
        return f"task_error: {r.error}"
    status = r.verdict.status.value
    if status != "correct" and status not in MESSAGES:
        MESSAGES[status] = f"{r.job.tag}: {r.verdict.message[:400]}"
        print(f"first {status}: {MESSAGES[status]}", flush=True)
    return status


BUSY: dict[str, dict] = {}  # each side's CPU and GPU use (Busy.summary)


def timed(pool, jobs: list[Job], side: str) -> tuple[float, dict[str, str]]:  # noqa: ANN001 - any executor
    t0 = time.perf_counter()
    results = {}
    with Busy() as busy:
        for r in pool.map(jobs):
            results[r.job.tag] = outcome(r)
            detail(side, r)
    BUSY[side] = busy.summary()
    return time.perf_counter() - t0, results


def speedup_agreement(a: str, b: str) -> dict:
    """How far the speedups side `b` measured lie from side `a`'s, candidate by candidate: the median and the
    largest |log(b / a)| as a ratio. Judging on two GPUs at once must not move the numbers."""
    first = {d["job"]: d["speedup"] for d in DETAILS if d["side"] == a and d["speedup"]}
    ratios = sorted(abs(math.log(d["speedup"] / first[d["job"]])) for d in DETAILS
                    if d["side"] == b and d["speedup"] and d["job"] in first)
    if not ratios:
        return {}
    return {"candidates": len(ratios), "median_ratio": math.exp(statistics.median(ratios)), "max_ratio": math.exp(ratios[-1])}


def local(jobs: list[Job], cache: Path, workers: int) -> dict:
    with LocalPool("cuda", cache_dir=cache, device_indices=[0, 1], workers=workers) as pool:
        warm_s, warm = timed(pool, jobs, "warm-up")
    out = {"warm_up_s": warm_s, "warm_up": warm}
    for name, indices in (("1 GPU", [0]), ("2 GPUs", [0, 1])):
        with LocalPool("cuda", cache_dir=cache, device_indices=indices, workers=workers) as pool:
            wall, res = timed(pool, jobs, name)
        out[name] = {"wall_s": wall, "verdicts_per_min": len(jobs) / wall * 60, "results": res}
    out["scaling"] = out["2 GPUs"]["verdicts_per_min"] / out["1 GPU"]["verdicts_per_min"]
    out["speedups_2_vs_1"] = speedup_agreement("1 GPU", "2 GPUs")
    return out


def ray_pool(jobs: list[Job], cache: Path, workers: int, warm_up: bool) -> dict:
    """RayPool on this node's GPUs; without `warm_up`, `cache` is already warm (the service's, run first)."""
    from kernelcraft.judge import RayPool
    t0 = time.perf_counter()
    with RayPool("cuda", address="local", workers=workers, cache_dir=str(cache)) as pool:
        started = time.perf_counter() - t0
        hosts = [(h.node[:12], h.index, h.description.name) for h in pool.hosts]
        warm_s = timed(pool, jobs, "ray warm-up")[0] if warm_up else None
        wall, res = timed(pool, jobs, "ray")
    return {"start_s": started, "hosts": hosts, "warm_up_s": warm_s, "wall_s": wall,
            "verdicts_per_min": len(jobs) / wall * 60, "results": res}


def service(jobs: list[Job], workspace: Path, workers: int, out: Path) -> dict:
    from kernelcraft.service import JudgeClient
    token = "scaling-benchmark"
    env = {**os.environ, "KERNELCRAFT_JUDGE_TOKEN": token}
    log = open(out / "serve-judge.log", "w")
    cmd = [sys.executable, "-m", "kernelcraft.cli", "serve-judge", "-w", str(workspace), "--device", "cuda",
           "--gpus", "0,1", "--workers", str(workers), "--port", "0"]
    from kernelcraft.judge.isolation import isolation
    iso = isolation()
    if not iso.complete:  # said in the report: the service then runs candidates without full isolation
        cmd.append("--insecure")
    server = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=log, text=True)
    url = None
    for line in server.stderr:  # type: ignore[union-attr]
        log.write(line)
        m = re.search(r"judge service on (http://\S+)", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        server.wait()
        return {"error": f"serve-judge did not start (exit {server.returncode}); see serve-judge.log"}
    # the 40 candidates, each submitted 5 times (distinct client keys): the service judges each once and hands its
    # verdict to the repeats (judge.reuse), as it does for an RL batch's repeated samples
    subs = [(j, i) for i in range(SUBMISSIONS // len(jobs)) for j in jobs]
    t0 = time.perf_counter()
    with JudgeClient(url, token, timeout=120.0) as client:
        def one(item: tuple[Job, int]) -> tuple[str, str]:
            j, i = item
            v = client.evaluate(None, j.source, task_source=j.task.source, task_name=j.task.name,
                                sizes=j.task.sizes_for("cuda"), client_key=f"{j.tag}#{i}")
            return f"{j.tag}#{i}", v.status.value
        with ThreadPoolExecutor(max_workers=SUBMISSIONS) as submitters:
            got = dict(submitters.map(one, subs))
        health = client.health()
    wall = time.perf_counter() - t0
    server.terminate()
    server.wait(timeout=120)
    return {"submissions": len(subs), "verdicts": len(got), "wall_s": wall, "verdicts_per_min": len(got) / wall * 60,
            "results": got, "health": health.model_dump(), "isolation_problems": iso.problems}


def guarded(part) -> dict:  # noqa: ANN001
    """A part's report, or the error that stopped it (the other parts still run)."""
    try:
        return part()
    except Exception as e:  # noqa: BLE001 - said in the table and the JSON
        return {"error": f"{type(e).__name__}: {e}"[:500]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", default="local,ray,service")
    ap.add_argument("--workers", type=int, default=8, help="concurrent evaluations per GPU")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    print(f"devices: {names}", flush=True)
    if len(names) < 2:
        sys.exit("judge_scaling needs 2 GPUs")
    jobs = scaling_jobs()
    cache = Path(tempfile.mkdtemp(prefix="kc-scaling-"))
    cache.chmod(0o755)  # the sandbox's worker user must reach the build cache below it (mkdtemp makes it 0700)
    report: dict = {"devices": names, "candidates": len(jobs), "workers_per_gpu": args.workers}
    parts = args.parts.split(",")
    if "local" in parts:
        report["local"] = local(jobs, cache / "local", args.workers)
    if "service" in parts:  # before Ray: Ray then judges on the build cache the service warmed
        report["service"] = guarded(lambda: service(jobs, cache / "service-ws", args.workers, args.out))
    if "ray" in parts:
        ray_cache = cache / "service-ws" / "cache" if "service" in parts else cache / "ray"
        report["ray"] = guarded(lambda: ray_pool(jobs, ray_cache, args.workers, warm_up="service" not in parts))
    report["details"] = DETAILS
    report["busy"] = BUSY
    (args.out / "judge_scaling.json").write_text(json.dumps(report, indent=1, default=str))
    report["messages"] = MESSAGES
    sides = {k: v for k, v in (("1 GPU", report.get("local", {}).get("1 GPU")),
                               ("2 GPUs", report.get("local", {}).get("2 GPUs")),
                               ("Ray, 2 GPUs", report.get("ray")), ("service, 2 GPUs", report.get("service"))) if v}
    reference = next(iter(sides.values()), {}).get("results", {})
    print(f"\n{'side':<18}{'verdicts':>9}{'wall s':>9}{'verdicts/min':>14}{'CPU busy':>10}{'GPU util':>14}  same statuses as the first")
    for name, side in sides.items():
        if "error" in side:
            print(f"{name:<18}{side['error']}")
            continue
        res = side["results"]
        same = all(res[k] == reference.get(k, res[k]) for k in res)
        if name.startswith("service"):  # its candidates are variants: compare with their original's status
            same = all(status == reference.get(tag.rsplit("#", 1)[0], status) for tag, status in res.items())
            same = same and side.get("verdicts") == side.get("submissions")
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(Counter(res.values()).items()))
        use = BUSY.get({"Ray, 2 GPUs": "ray", "service, 2 GPUs": "service"}.get(name, name), {})
        cpu = f"{use['cpu_busy']:.0%}" if use.get("cpu_busy") is not None else "-"
        gpu = "/".join(f"{u:.0%}" for u in use.get("gpu_util", {}).values() if u is not None) or "-"
        print(f"{name:<18}{len(res):>9}{side['wall_s']:>9.1f}{side['verdicts_per_min']:>14.1f}{cpu:>10}{gpu:>14}  {same} ({statuses})")
    if "local" in report:
        print(f"scaling 2 GPUs / 1 GPU: {report['local']['scaling']:.2f}x (target >= 1.8x)")
        agree = report["local"].get("speedups_2_vs_1") or {}
        if agree:
            print(f"speedups on 2 GPUs against 1 GPU, {agree['candidates']} candidates: median {agree['median_ratio']:.3f}x "
                  f"apart, at most {agree['max_ratio']:.3f}x")
    if "service" in report and "submissions" in report["service"]:
        s = report["service"]
        print(f"service: {s['submissions']} submitted, {s['verdicts']} verdicts, lost {s['submissions'] - s['verdicts']}")


if __name__ == "__main__":
    main()
