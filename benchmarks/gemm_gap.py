"""Where the template search's kernels lose to torch.matmul: host time or device time.

For each shape of a device's newest template run in a workspace, the best kernel of the run is rendered
again from its configuration and timed in this one process against the task's reference module
(torch.matmul), interleaved, two ways:
  judge   the judge's clock: L2 flushed, the device idle when the start event is recorded, so the
          host's work for the call (Python, binding, allocation, launch) is counted in full
  device  the same call queued behind the L2 flush: the start event is recorded while the device is
          still flushing, so the host work overlaps the flush and only the kernels' time is counted
The difference of the two ratios is what the host path costs a kernel against cuBLAS's.

    python benchmarks/gemm_gap.py --workspace WS --worst 12
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from device_clock import queued_ms  # noqa: E402  (sibling scripts: benchmarks run as `python benchmarks/X.py`)
from hgemm import rows_of, template_runs  # noqa: E402
from kernelbench_style import module_from_source  # noqa: E402
from kernelcraft.judge import TimingConfig  # noqa: E402
from kernelcraft.judge.worker.timing import Clock  # noqa: E402
from kernelcraft.search.gemm_space import config_from_dict, render_config  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import hgemm_task, parse_shapes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--shapes", default="", help="MxNxK,... (default: the run's shapes, worst first)")
    ap.add_argument("--worst", type=int, default=12, help="How many of the run's worst shapes, without --shapes.")
    ap.add_argument("--iters", type=int, default=100)
    args = ap.parse_args()
    dev = torch.device("cuda")
    device_name = torch.cuda.get_device_name()
    with Store(args.workspace) as store:
        run_id = template_runs(store, device_name)[-1].id
        rows = [r for r in rows_of(store, run_id, device_name)[0] if r.vs_matmul is not None]
    if args.shapes:
        wanted = {str(s) for s in parse_shapes(args.shapes)}
        rows = [r for r in rows if r.shape in wanted]
    else:
        rows = sorted(rows, key=lambda r: r.vs_matmul)[:args.worst]
    clock = Clock(dev, TimingConfig())
    print(f"device: {device_name}, torch {torch.__version__}; run {run_id}; median of {args.iters} interleaved calls")
    print(f"{'shape':>18} {'judged':>7} {'judge us':>17} {'ratio':>6} {'device us':>17} {'ratio':>6}  kernel")
    for r in rows:
        shape = parse_shapes(r.shape)[0]
        model = module_from_source(render_config(config_from_dict(json.loads(r.config))), f"gap_{r.shape}").ModelNew()
        reference = module_from_source(hgemm_task(shape).source, f"ref_{r.shape}").Model().to(dev)
        a = torch.randn(shape.m, shape.k, device=dev, dtype=torch.float16)
        b = torch.randn(shape.k, shape.n, device=dev, dtype=torch.float16)
        for _ in range(5):
            out = model(a, b)
        torch.testing.assert_close(out, reference(a, b), atol=2e-1, rtol=2e-2)
        times: dict[str, list[float]] = {"judge_ref": [], "judge_cand": [], "dev_ref": [], "dev_cand": []}
        for _ in range(args.iters):
            for side, fn in (("ref", reference), ("cand", model)):
                times[f"judge_{side}"].append(clock.time_call(fn, [a, b])[0] * 1000)
                times[f"dev_{side}"].append(queued_ms(clock, fn, [a, b]) * 1000)
        med = {key: statistics.median(v) for key, v in times.items()}
        print(f"{r.shape:>18} {r.vs_matmul:6.3f}x {med['judge_cand']:8.1f}/{med['judge_ref']:<8.1f} "
              f"{med['judge_ref'] / med['judge_cand']:5.3f}x {med['dev_cand']:8.1f}/{med['dev_ref']:<8.1f} "
              f"{med['dev_ref'] / med['dev_cand']:5.3f}x  {r.kernel}")


if __name__ == "__main__":
    main()
