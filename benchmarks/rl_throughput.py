"""RL throughput: a few GRPO steps through TRL (kernelcraft.train.trl_adapter) on one task, the reward from
the real judge on the chosen device, with a tiny randomly initialised local model. Its tokenizer holds
whole candidates as single tokens (by default the bundled honest candidate for the task and device, plus a
copy with its output doubled, which the judge does not pass), so the random model's answers reach the judge
and get different verdicts. Prints episodes per minute and judge seconds per episode. Target: the loop
runs end to end on the device with finite losses and varying rewards, the judge under one second per
episode.

    python benchmarks/rl_throughput.py leaky_relu_clamp --device cuda --steps 3
    python benchmarks/rl_throughput.py rowwise.py --device cpu --candidate fast.py --candidate slow.py

Needs torch, triton, transformers, trl, accelerate, datasets and kernelcraft; downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

import torch

from kernelcraft.tasks import resolve_task
from kernelcraft.train.config import RLConfig
from kernelcraft.train.tiny_model import tiny_model
from kernelcraft.train.trl_adapter import train_grpo

ROOT = Path(__file__).resolve().parent.parent
def default_candidates(task_spec: str, device: str) -> list[str]:
    name = resolve_task(task_spec).name
    honest = ROOT / "examples" / "candidates" / device / f"{name}.py"
    if not honest.is_file():
        sys.exit(f"no bundled candidate {honest}: give --candidate FILE")
    source = honest.read_text()
    marker = "class ModelNew"
    wrong = source.replace(marker, "class _Honest", 1) + (
        f"\n\n{marker}(_Honest):\n    def forward(self, *args):\n        return 2 * super().forward(*args)\n")
    return [source, wrong]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", help="a bundled task name or a task file")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--candidate", type=Path, action="append", default=[], help="a candidate file to put in the vocabulary")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--generations", type=int, default=8, help="samples per step (one group)")
    ap.add_argument("--turns", type=int, default=2, help="coder turns per episode")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--workspace", default="kernelcraft-workspace", help="where the judge's build cache is")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    candidates = [p.read_text() for p in args.candidate] or default_candidates(args.task, args.device)
    work = Path(tempfile.mkdtemp(prefix="kc-rl-bench-"))
    model = tiny_model(work / "model", candidates, hidden=args.hidden)
    cfg = RLConfig.model_validate({
        "model": str(model), "tasks": [args.task], "device": args.device, "workspace": args.workspace,
        "output_dir": str(work / "out"), "env": {"language": "cuda", "max_turns": args.turns},
        "trl": {"steps": args.steps, "num_generations": args.generations, "batch_size": args.generations,
                "max_completion_length": 4, "use_cpu": args.device == "cpu", "bf16": False, "judge_workers": 4},
    })
    summary = train_grpo(cfg).summary()
    device = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine()
    row = {"device": device, "task": args.task, **summary}
    if args.json:
        print(json.dumps(row, indent=1))
        return
    keys = ["device", "task", "steps", "episodes", "episodes_per_min", "judge_s_per_episode", "judge_evaluations",
            "correct_turns", "wall_s"]
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    print("| " + " | ".join(str(row[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
