"""Search strategies side by side: the same tasks, the same budget, one fresh workspace per
strategy (so no strategy reuses another's verdicts), every run through `kernelcraft optimize`.
Prints, per strategy, fast_1 and fast_1.2, the geometric-mean speedup of solved tasks, judge
calls, model calls and tokens. Target: every strategy within the same budget, so that fast_p per
judge call and per token compares them.

Against a real endpoint:
    python benchmarks/search_compare.py --target examples --device cuda --model NAME --base-url URL \
        --budget-judge-calls 40 --out $OUT
On CPU with a scripted model (CI-sized; it answers with kernelcraft's CPU example kernels, some
deliberately wrong, so the table shows the pipeline, not a model's skill):
    python benchmarks/search_compare.py --scripted --device cpu
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelcraft.report import geomean  # noqa: E402
from kernelcraft.search.registry import OWN_SETTINGS  # noqa: E402
from kernelcraft.tasks import resolve_task  # noqa: E402

CPU_TASKS = ["leaky_relu_clamp", "rms_norm", "scale_bias_gelu", "swish_residual"]  # C++ kernels in examples/candidates/cpu
STRATEGIES = ["refine", "branch", "contrastive", "evolve"]
FAST_TOML = "[judge.timing]\nwarmup_ms = 5.0\nmin_iters = 5\nmax_iters = 40\ntarget_ms = 60.0\n"


def scripted_responder() -> Any:
    """A stand-in model for CPU runs: the example kernel for the task in the prompt, wrong (scaled by 1.5)
    for about a third of prompts, chosen by a hash of the prompt so every run answers alike."""
    kernels = {name: (ROOT / "examples" / "candidates" / "cpu" / f"{name}.py").read_text() for name in CPU_TASKS}
    sources = {name: resolve_task(name).source.strip() for name in CPU_TASKS}

    def respond(messages: list[dict[str, Any]]) -> str:
        system, text = messages[0]["content"], "\n".join(m["content"] for m in messages)
        if "You do not write code" in system:
            return '```json\n{"ideas": ["fuse everything into one loop", "vectorize the inner loop", "use fewer passes"]}\n```'
        if "You choose which optimization" in system or "You distil" in system:
            return '```json\n{"skills": []}\n```'
        name = next(n for n, src in sources.items() if src in text)
        source = kernels[name]
        if int(hashlib.sha256(text.encode()).hexdigest(), 16) % 3 == 0:
            source = re.sub(r"(def forward\(self[^)]*\):\n\s+)return ", r"\1return 1.5 * ", source, count=1)
        return f"```python\n{source}```\n"

    return respond


def run_strategy(strategy: str, args: argparse.Namespace, base_url: str, model: str, cache: Path) -> dict[str, Any]:
    ws = Path(tempfile.mkdtemp(prefix=f"kc-compare-{strategy}-"))
    (ws / "cache").symlink_to(cache)  # builds are shared; verdicts are not
    cmd = [sys.executable, "-m", "kernelcraft.cli", "optimize", args.target, "--model", model, "--base-url", base_url,
           "--device", args.device, "--strategy", strategy, "--budget-judge-calls", str(args.budget_judge_calls),
           "--workspace", str(ws), "--json"]
    shape = {"turns": ["--turns", str(args.turns)], "samples": ["--samples", str(args.samples)],
             "evolve": ["--generations", str(args.turns * args.samples)]}
    cmd += [word for setting in OWN_SETTINGS[strategy] for word in shape.get(setting, [])]  # another's option is refused
    if args.config:
        cmd += ["--config", str(args.config)]
    if args.budget_tokens:
        cmd += ["--budget-tokens", str(args.budget_tokens)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise SystemExit(f"{strategy}: kernelcraft optimize failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    result = json.loads(p.stdout)
    with sqlite3.connect(ws / "kernelcraft.db") as c:
        judge_calls = c.execute("SELECT count(*) FROM verdicts WHERE run_id=?", (result["run_id"],)).fetchone()[0]
    speedups = [t["speedup"] for t in result["tasks"]]
    n = len(speedups)
    return {"strategy": strategy, "tasks": n, "fast_1": sum(1 for s in speedups if s and s > 1.0) / n,
            "fast_1.2": sum(1 for s in speedups if s and s > 1.2) / n, "geomean": geomean([s for s in speedups if s]),
            "judge_calls": judge_calls, "model_calls": result["spend"]["calls"],
            "tokens": result["spend"]["prompt_tokens"] + result["spend"]["completion_tokens"],
            "stopped": result["stopped"] or "", "report": result["report"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", help="Tasks (a suite, a file, 'examples'); default with --scripted: four CPU examples.")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--model", default="scripted")
    ap.add_argument("--base-url")
    ap.add_argument("--scripted", action="store_true", help="Answer with a scripted model on a loopback endpoint.")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--budget-judge-calls", type=int, default=16)
    ap.add_argument("--budget-tokens", type=int)
    ap.add_argument("--config", type=Path, help="An optimize run file (TOML; judge settings in its [judge] tables); with --scripted, short timing by default.")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-out")))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="kc-compare-cache-"))
    server = None
    if args.scripted:
        from tests.fake_openai import FakeOpenAI
        if args.target is None:
            suite = Path(tempfile.mkdtemp(prefix="kc-compare-suite-"))
            for name in CPU_TASKS:
                (suite / f"{name}.py").write_text(resolve_task(name).source)
            args.target = str(suite)
        if args.config is None:
            args.config = args.out / "fast.toml"
            args.config.write_text(FAST_TOML)
        server = FakeOpenAI(models=[args.model], responder=scripted_responder()).__enter__()
        args.base_url = server.url
    if not args.target or not args.base_url:
        raise SystemExit("give --target and --base-url (or --scripted)")
    rows = []
    try:
        for strategy in args.strategies.split(","):
            rows.append(run_strategy(strategy, args, args.base_url, args.model, cache))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    (args.out / "search_compare.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'strategy':<12} {'tasks':>5} {'fast_1':>7} {'fast_1.2':>8} {'geomean':>8} {'judge':>6} {'calls':>6} {'tokens':>8}  stopped")
    for r in rows:
        g = f"{r['geomean']:.2f}x" if r["geomean"] else "-"
        print(f"{r['strategy']:<12} {r['tasks']:>5} {r['fast_1']:>7.0%} {r['fast_1.2']:>8.0%} {g:>8} {r['judge_calls']:>6} "
              f"{r['model_calls']:>6} {r['tokens']:>8}  {r['stopped']}")


if __name__ == "__main__":
    main()
