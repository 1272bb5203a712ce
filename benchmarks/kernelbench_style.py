"""The one-process way of evaluating, as the KernelBench harness does it: for each candidate in
turn, in one process, import it (building its extension, serially), run reference and candidate
side by side for 5 correctness trials, then time 100 calls with CUDA events. No isolation, no
parallel builds. Used as the baseline of benchmarks/judge_throughput.py.

Run as `python kernelbench_style.py JOBS.json OUT.json` (a fresh process with fresh caches).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
import types
from pathlib import Path

import torch


def module_from_source(source: str, name: str) -> types.ModuleType:
    """Import source from a real file, as KernelBench does (Triton needs the file for @jit)."""
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def run_one(task_source: str, sizes: dict, candidate_source: str, idx: int) -> dict:
    t0 = time.perf_counter()
    task = module_from_source(task_source, f"task{idx}")
    for k, v in sizes.items():
        setattr(task, k, v)
    init = task.get_init_inputs()
    torch.manual_seed(42)
    ref = task.Model(*init).cuda()
    cand_mod = module_from_source(candidate_source, f"cand{idx}")
    build_s = time.perf_counter() - t0
    torch.manual_seed(42)
    new = cand_mod.ModelNew(*init).cuda()
    correct = True
    with torch.no_grad():
        for trial in range(5):
            torch.manual_seed(trial)
            xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
            correct &= bool(torch.allclose(ref(*xs), new(*xs), atol=1e-2, rtol=1e-2))
        torch.manual_seed(0)
        xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
        times = []
        for model in (ref, new):
            for _ in range(3):
                model(*xs)
            torch.cuda.synchronize()
            ts = []
            for _ in range(100):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                model(*xs)
                e.record()
                torch.cuda.synchronize()
                ts.append(s.elapsed_time(e))
            times.append(sorted(ts)[50])
    return {"correct": correct, "speedup": times[0] / times[1], "build_s": build_s, "seconds": time.perf_counter() - t0}


def main() -> None:
    jobs = json.loads(open(sys.argv[1]).read())
    results = []
    for i, job in enumerate(jobs):
        try:
            results.append(run_one(job["task_source"], job["sizes"], job["candidate_source"], i))
        except Exception as e:  # noqa: BLE001 - one broken candidate is a result here, as in KernelBench
            results.append({"correct": False, "error": f"{type(e).__name__}: {e}"[:300]})
        torch.cuda.empty_cache()
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
