"""Per-shape fp16 GEMM: the template search against torch.matmul and TunableOp, offline and server.

One workspace holds everything measured, so the benchmark runs in slices of a few minutes and
resumes: baselines are timed only for shapes that lack them on this device, and the template
search run is continued with `--resume` until every shape is done.

    python benchmarks/hgemm.py --device cuda --sample 64 --workspace WS --budget-wall-s 420 --out $OUT

Prints one row per shape, then for each comparison (vs torch.matmul and vs TunableOp, offline and
server) the geometric mean, the median, the win rate (significant wins: outside the noise band)
and the worst shape; and the number of candidates that failed a check (0/1 exact, guard zones,
random inputs), with the count of every other status (a hack_detected is an audit's reject); and how
many verdicts the run reused from earlier runs (the same source judged in the same context).
Target: a geometric mean of at least 1.0x against torch.matmul offline, every candidate that fails a
check counted, none that fails one shipped.
Speedups vs TunableOp are the kernel's speedup vs torch.matmul (measured interleaved with it in
the judge) times TunableOp's time over torch.matmul's (both from one trusted baseline run). The row
"vs mm alone where slowed" counts a best kernel whose verdict is flagged slowed_reference at its
speedup over torch.matmul's trusted time alone, as kernel packs and RL rewards do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelcraft.judge import Judge, JudgeConfig, baseline_kind, describe_device, overstatement  # noqa: E402
from kernelcraft.report import geomean  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import hgemm_tasks, parse_shapes  # noqa: E402

SCENARIOS = ("offline", "server")
JUDGE_TOML = "[judge.timing]\nserver = true\n"  # an optimize run file: the judge times the server scenario too
STOP_GRACE_S = 30.0  # how long a slice's search may overrun its budget before it is stopped


@dataclass
class ShapeRow:
    shape: str
    status: str
    kernel_ms: float | None = None
    matmul_ms: float | None = None
    vs_matmul: float | None = None
    # where the verdict is flagged slowed_reference: the speedup over torch.matmul's trusted time alone
    # (the host's speed accounted), as packs and RL rewards count it; else vs_matmul
    vs_matmul_alone: float | None = None
    vs_matmul_server: float | None = None
    vs_tunableop: float | None = None
    vs_tunableop_server: float | None = None
    vs_matmul_sustained: float | None = None  # the sustained scenario (the head-to-head judges in it)
    vs_tunableop_sustained: float | None = None
    significant: bool = False
    config: str = ""
    kernel: str = ""  # the best kernel's configuration name, e.g. tma_persistent_128x256x64_g8_s3_w8
    reused: bool = False  # its verdict was measured by an earlier run (same source and judge context) and reused


def record_baselines(store: Store, judge: Judge, tasks: list, device_name: str, deadline: float,
                     scenarios: tuple[str, ...] = SCENARIOS) -> int:
    """TunableOp and eager times per scenario for shapes that lack them on this device, a shape's scenarios from
    one trusted worker; stops at the deadline."""
    done, tunable = 0, judge.device == "cuda"  # TunableOp is a CUDA feature
    for t in tasks:
        if time.monotonic() > deadline:
            return done
        missing = missing_scenarios(store.baselines(t.key, device_name), scenarios, tunable)
        if not missing:
            continue
        store.put_task(t)
        for scenario, by_side in judge.baselines(t, compiled=False, tunableop=tunable, scenarios=missing).items():
            for side, stats in by_side.items():
                store.record_baseline(t.key, judge.device, device_name, baseline_kind(side, scenario), stats, torch.__version__)
        done += len(missing)
    return done


def missing_scenarios(have: dict, scenarios: tuple[str, ...], tunable: bool) -> tuple[str, ...]:
    """The scenarios whose eager (and, with `tunable`, TunableOp) baseline a shape's recorded `have` lacks."""
    return tuple(sc for sc in scenarios if baseline_kind("reference", sc) not in have
                 or (tunable and baseline_kind("tunableop", sc) not in have))


def template_runs(store: Store, device_name: str | None) -> list:
    """The workspace's template runs judged on this device (or not judged yet; None: on any), oldest first: a
    run is never continued on another device, so its numbers all come from one."""
    return [r for r in store.runs("optimize") if r.args["search"]["strategy"] == "template"
            and (device_name is None or {v.device_name for v in store.verdicts(run_id=r.id)} <= {device_name})]


def search(args: argparse.Namespace, wall_s: float, device_name: str) -> subprocess.CompletedProcess:
    """Start or continue the template search run (the newest unfinished one of this device)."""
    with Store(args.workspace) as store:
        unfinished = [r for r in template_runs(store, device_name) if r.finished_at is None]
    common = ["--budget-wall-s", str(int(wall_s)), "--workspace", str(args.workspace), "--json"]
    if unfinished and not args.new_run:
        cmd = ["optimize", "--resume", unfinished[-1].id, *common]
    else:
        toml = args.out / "judge.toml"
        toml.write_text(JUDGE_TOML)
        select = ["--shapes", args.shapes] if args.shapes else ["--sample", str(args.sample)]
        cmd = ["optimize", "hgemm", *select, "--strategy", "template", "--device", args.device,
               "--configs", str(args.configs), "--finalists", str(args.finalists), "--config", str(toml), *common]
    proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.cli", *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=wall_s + STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        # The budget stops new judge calls, not those under way (a large shape's can take minutes): a
        # slice must end in time for its workspace to come back, and SIGTERM ends a run as Ctrl-C does.
        proc.terminate()
        stdout, stderr = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def rows_of(store: Store, run_id: str, device_name: str) -> tuple[list[ShapeRow], Counter]:
    """Per shape, the best kernel of the fine stage (precise timing) with its ratios; and how many
    verdicts of each status other than correct (incorrect: a check failed; hack_detected: an audit
    rejected a measurement)."""
    rows, other = [], Counter()
    measured_here = {v.id for v in store.verdicts(run_id=run_id)}
    for rt in store.run_tasks(run_id):
        attempts = store.attempts(run_id, rt.task_key)
        other.update(a.status for a in attempts if a.status != "correct")
        fine = [a for a in attempts if a.status == "correct" and a.meta.get("stage") == "fine"
                and store.verdict(a.verdict_id).env.get("device_name") == device_name]  # one device's numbers only
        best = max(fine, key=lambda a: a.speedup or 0.0, default=None)
        row = ShapeRow(shape=rt.task_key.removeprefix("hgemm/"), status="done" if best else "not done here")
        if best is not None:
            v = store.verdict(best.verdict_id)
            b = store.baselines(rt.task_key, device_name)
            row.kernel_ms, row.matmul_ms, row.vs_matmul = v.candidate.median_ms, v.reference.median_ms, v.speedup
            row.vs_matmul_alone = v.speedup / overstatement(v)
            row.significant = v.significant and v.speedup > 1.0
            row.config = json.dumps(best.meta.get("config", {}), separators=(",", ":"))
            row.kernel = best.meta.get("name", "")
            row.reused = best.verdict_id not in measured_here
            server = v.scenarios.get("server")
            row.vs_matmul_server = server["speedup"] if server else None
            row.vs_tunableop = vs_tunableop(b, "offline", row.vs_matmul)
            row.vs_tunableop_server = vs_tunableop(b, "server", row.vs_matmul_server)
        rows.append(row)
    return rows, other


def vs_tunableop(baselines: dict, scenario: str, vs_matmul: float | None) -> float | None:
    """A kernel's speedup over TunableOp in `scenario`: its speedup over torch.matmul times TunableOp's time
    over torch.matmul's (both from one trusted baseline run); None where a side is missing."""
    eager, tuned = baselines.get(baseline_kind("reference", scenario)), baselines.get(baseline_kind("tunableop", scenario))
    return vs_matmul * tuned.median_ms / eager.median_ms if eager and tuned and vs_matmul else None


def reuse_counts(store: Store, run_id: str) -> tuple[int, int]:
    """The run's verdicts, and how many of them an earlier run measured (a candidate judged again in
    the same context reuses its verdict)."""
    measured_here = {v.id for v in store.verdicts(run_id=run_id)}
    used = [a.verdict_id for rt in store.run_tasks(run_id) for a in store.attempts(run_id, rt.task_key) if a.verdict_id]
    return len(used), sum(1 for vid in used if vid not in measured_here)


def summary(rows: list[ShapeRow]) -> list[dict]:
    out = []
    for attr, label in (("vs_matmul", "vs torch.matmul, offline"), ("vs_matmul_alone", "vs mm alone where slowed"),
                        ("vs_matmul_server", "vs torch.matmul, server"),
                        ("vs_tunableop", "vs TunableOp, offline"), ("vs_tunableop_server", "vs TunableOp, server"),
                        ("vs_matmul_sustained", "vs torch.matmul, sustained"),
                        ("vs_tunableop_sustained", "vs TunableOp, sustained")):
        pairs = [(r.shape, getattr(r, attr)) for r in rows if getattr(r, attr)]
        if not pairs:
            continue
        xs = [x for _, x in pairs]
        worst = min(pairs, key=lambda p: p[1])
        offline_vs_matmul = attr in ("vs_matmul", "vs_matmul_alone")  # a win there must also be significant
        wins = sum(1 for r in rows if getattr(r, attr) and getattr(r, attr) > 1.0 and (not offline_vs_matmul or r.significant))
        out.append({"comparison": label, "shapes": len(xs), "geomean": geomean(xs), "median": statistics.median(xs),
                    "win_rate": wins / len(xs), "worst": f"{worst[1]:.2f}x ({worst[0]})"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sample", type=int, default=64, help="Stratified grid shapes.")
    ap.add_argument("--shapes", help="Explicit shapes instead, MxNxK,... (e.g. tiny ones for a CPU smoke run).")
    ap.add_argument("--configs", type=int, default=12, help="Template configurations judged per shape (coarse stage).")
    ap.add_argument("--finalists", type=int, default=2, help="Configurations re-timed precisely per shape.")
    ap.add_argument("--workspace", type=Path, default=Path("hgemm-ws"))
    ap.add_argument("--budget-wall-s", type=float, default=420.0, help="Wall time of this slice, baselines and search.")
    ap.add_argument("--baseline-share", type=float, default=0.35, help="Share of the slice baselines may take.")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    ap.add_argument("--new-run", action="store_true",
                    help="Start a new template run even where this device has an unfinished one (e.g. after a template change).")
    ap.add_argument("--report-only", metavar="DEVICE_NAME",
                    help="Only print the report of this device's newest template run (no GPU needed).")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        with Store(args.workspace) as store:
            runs = [r for r in store.runs("optimize") if r.args["search"]["strategy"] == "template"
                    and args.report_only in {v.device_name for v in store.verdicts(run_id=r.id)}]
        if not runs:
            raise SystemExit(f"no template run on {args.report_only} in {args.workspace}")
        print_report(args, runs[-1].id, None if runs[-1].finished_at else "not finished", args.report_only)
        return
    start = time.monotonic()
    tasks = hgemm_tasks(shapes=parse_shapes(args.shapes)) if args.shapes else hgemm_tasks(sample=args.sample)
    with Store(args.workspace) as store:
        judge = Judge(args.device, cache_dir=store.cache_dir, config=JudgeConfig().with_overrides({"timing": {"server": True}}))
        device_name = describe_device(args.device).name
        timed = record_baselines(store, judge, tasks, device_name, start + args.budget_wall_s * args.baseline_share)
        print(f"baselines timed this slice: {timed} (shape, scenario) pairs", flush=True)
    p = search(args, max(30.0, args.budget_wall_s - (time.monotonic() - start)), device_name)
    if p.returncode == 130:  # stopped at the slice's hard limit: its verdicts are in the store
        with Store(args.workspace) as store:
            run_id = template_runs(store, device_name)[-1].id
        print_report(args, run_id, "the slice's time limit", device_name)
        return
    if p.returncode not in (0, 3):
        raise SystemExit(f"the template search failed ({p.returncode}): {p.stderr.strip()[-1500:]}")
    result = json.loads(p.stdout)
    print_report(args, result["run_id"], result["stopped"], device_name)


def print_report(args: argparse.Namespace, run_id: str, stopped: str | None, device_name: str) -> None:
    result = {"run_id": run_id, "stopped": stopped}
    with Store(args.workspace) as store:
        rows, other = rows_of(store, result["run_id"], device_name)
        verdicts, reused = reuse_counts(store, result["run_id"])
    done = [r for r in rows if r.status == "done"]
    (args.out / "hgemm.json").write_text(json.dumps({"device": device_name, "run_id": result["run_id"],
                                                     "stopped": result["stopped"], "failed_checks": other["incorrect"],
                                                     "verdicts": verdicts, "reused_verdicts": reused,
                                                     "other_statuses": dict(other),
                                                     "rows": [asdict(r) for r in rows], "summary": summary(done)}, indent=1))
    print(f"\n{'shape':<18} {'kernel ms':>10} {'matmul ms':>10} {'vs mm':>7} {'vs mm srv':>9} {'vs tuned':>8} {'vs tuned srv':>12}"
          "  best kernel")
    for r in rows:
        f = lambda x: f"{x:.2f}x" if x else "-"  # noqa: E731
        ms = lambda x: f"{x:.4g}" if x else "-"  # noqa: E731
        print(f"{r.shape:<18} {ms(r.kernel_ms):>10} {ms(r.matmul_ms):>10} {f(r.vs_matmul):>7} {f(r.vs_matmul_server):>9} "
              f"{f(r.vs_tunableop):>8} {f(r.vs_tunableop_server):>12}  {r.kernel}")
    print(f"\n{device_name}; run {result['run_id']}; {len(done)}/{len(rows)} shapes done"
          f"{'; stopped: ' + result['stopped'] if result['stopped'] else ''}; candidates failing a check: {other['incorrect']}"
          f"{''.join(f'; {status}: {n}' for status, n in sorted(other.items()) if status != 'incorrect')}")
    print(f"verdicts: {verdicts}, {reused} of them reused from earlier runs (same source and judge context); "
          f"best kernels measured by an earlier run: {sum(r.reused for r in done)}")
    print(f"{'comparison':<26} {'shapes':>6} {'geomean':>8} {'median':>7} {'wins':>5}  worst")
    for s in summary(done):
        print(f"{s['comparison']:<26} {s['shapes']:>6} {s['geomean']:>7.3f}x {s['median']:>6.3f}x {s['win_rate']:>5.0%}  {s['worst']}")
    families = Counter("cutlass" if r.kernel.startswith("cutlass") else "triton" for r in done)
    print("best kernels: " + ", ".join(f"{family} {n}" for family, n in sorted(families.items())))


if __name__ == "__main__":
    main()
