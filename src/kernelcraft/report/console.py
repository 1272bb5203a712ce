"""Rendering verdicts and summaries for people (rich)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ..judge import SPEEDUP_CREDIT, KernelProfile, Roofline, Verdict
from ..judge.kernel_profile import NCU
from .metrics import FAST_P, Summary, not_judged_text

# judge_error is the judge's failure, never the candidate's: its own colour, apart from the candidates' failures.
_STYLE = {"correct": "green", "incorrect": "red", "hack_detected": "bold red", "static_rejected": "yellow",
          "build_failed": "yellow", "load_failed": "yellow", "runtime_error": "red", "timeout": "red",
          "judge_error": "bold magenta", "not judged": "bold magenta"}


def status_text(status: str) -> Text:
    return Text(status, style=_STYLE.get(status, ""))


def verdict_table(v: Verdict) -> Table:
    t = Table(title=f"{v.task} on {v.device} ({v.env.get('device_name', '?')})", show_header=True, title_justify="left")
    t.add_column("stage")
    t.add_column("ok")
    t.add_column("seconds", justify="right")
    t.add_column("details")
    for s in v.stages:
        t.add_row(s.name, "yes" if s.ok else "NO", f"{s.seconds:.2f}", (s.message or "")[:160])
    return t


def _or_dash(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def roofline_table(r: Roofline) -> Table:
    """A correct verdict's achieved rates against the device's ceilings, and the floors they imply."""
    t = Table(title=f"roofline: {r.bound}-bound task, {r.share:.0%} of the roof reached", title_justify="left",
              caption=f"the reference's {r.flops / 1e9:.4g} GFLOP (as torch's FlopCounterMode counts: matmuls, convolutions, "
                      f"attention) and {r.bytes / 1e6:.4g} MB (inputs, outputs, parameters) per call, over the candidate's "
                      f"median {r.time_ms:.4g} ms; ceilings measured on this device", caption_justify="left")
    for col in ("", "achieved", "ceiling", "share", "floor"):
        t.add_column(col, justify="right" if col else "left")
    t.add_row("compute", f"{r.tflops:.4g} TFLOP/s", f"{r.peak_tflops:.4g} TFLOP/s", f"{r.compute_share:.1%}",
              f"{r.flop_floor_ms:.4g} ms")
    t.add_row("memory", f"{r.gbps:.4g} GB/s", f"{r.peak_gbps:.4g} GB/s", f"{r.memory_share:.1%}", f"{r.bytes_floor_ms:.4g} ms")
    return t


def kernel_table(p: KernelProfile) -> Table:
    """A kernel profile's top kernels: ncu's metrics and limiter, or the profiler's times alone."""
    note = f"no Nsight Compute metrics: {p.note}" if p.tool != NCU else p.note
    t = Table(title=f"top kernels by {p.tool or 'nothing'} ({p.seconds:.1f} s)", title_justify="left", caption=note or None,
              caption_justify="left")
    for col in ("kernel", "own", "calls", "us", "share", "DRAM %", "SM %", "occupancy %", "regs", "smem/block", "top stalls",
                "limiter"):
        t.add_column(col, justify="left" if col in ("kernel", "own", "top stalls", "limiter") else "right", overflow="fold")
    for k in p.kernels:
        t.add_row(k.label, "yes" if k.own else "", str(k.calls), f"{k.time_us:.1f}", f"{p.share(k):.0%}",
                  _or_dash(k.dram_pct, ".0f"), _or_dash(k.sm_pct, ".0f"), _or_dash(k.occupancy_pct, ".0f"), _or_dash(k.registers, "d"),
                  "-" if k.shared_bytes is None else f"{k.shared_bytes / 1024:.3g} KiB",
                  ", ".join(f"{reason} {cycles:.2g}" for reason, cycles in k.stalls) or "-", k.limiter or "-")
    return t


def verdict_lines(v: Verdict) -> list[str]:
    lines = [f"status: {v.status.value}", f"message: {v.message}"]
    if v.reference and v.candidate:
        lines.append(f"reference {v.reference.median_ms:.4g} ms [{v.reference.q1_ms:.4g}, {v.reference.q3_ms:.4g}]  "
                     f"candidate {v.candidate.median_ms:.4g} ms [{v.candidate.q1_ms:.4g}, {v.candidate.q3_ms:.4g}]  "
                     f"({len(v.candidate.samples_ms)} samples each, ABAB)")
    if v.speedup is not None and v.speedup_band:
        counted = "" if v.effective_speedup == v.speedup else f" (counted as {v.effective_speedup:.2f}x: {SPEEDUP_CREDIT})"
        lines.append(f"speedup {v.speedup:.3f}x, noise band {v.speedup_band[0]:.3f}-{v.speedup_band[1]:.3f}{counted}")
    if v.coverage is not None:
        lines.append(f"coverage {v.coverage:.0%} of forward time in the candidate's own kernels")
    if v.errors:
        lines.append("error: max abs {max_abs:.3g}, max rel {max_rel:.3g}, rel L2 {rel_l2:.3g}".format(**v.errors))
    lines += [f"flag {f.code}: {f.message}" for f in v.flags]
    return lines


def _set_name(s: Summary, with_device: bool) -> str:
    """A summary's name in the table's notes: its set, and its device when the table shows several."""
    return f"{s.label} on {s.device_name or '-'}" if with_device else s.label


def summary_table(summaries: list[Summary]) -> Table:
    """Per set of tasks, a row against each baseline (eager (strict) first); the caption says what was not
    judged or could not be placed against a baseline, and the rules. A "device" column appears only when the
    summaries come from several device names (each set is then summarized once per device)."""
    with_device = len({s.device_name for s in summaries}) > 1
    t = Table(title="suite summary: fast_p and speedups against each baseline", title_justify="left", caption_justify="left")
    t.add_column("set")
    if with_device:
        t.add_column("device")
    t.add_column("against")
    t.add_column("correct / tasks", justify="right")
    for p in FAST_P:
        t.add_column(f"fast_{p:g}", justify="right")
    t.add_column("geomean", justify="right")
    t.add_column("median", justify="right")
    t.add_column("win rate", justify="right")
    notes = []
    for s in summaries:
        name = _set_name(s, with_device)
        head = [s.label, s.device_name or "-"] if with_device else [s.label]  # on the set's first row only
        for i, b in enumerate(s.baselines):
            t.add_row(*(head if i == 0 else [""] * len(head)), b.label, f"{b.correct}/{b.tasks}",
                      *(f"{b.fast_p[p]:.0%}" for p in FAST_P),
                      f"{b.geomean:.2f}x" if b.geomean else "-", f"{b.median:.2f}x" if b.median else "-",
                      f"{b.win_rate:.0%}" if b.win_rate is not None else "-", end_section=i == len(s.baselines) - 1)
            if b.missing:
                notes.append(f"{name}: {b.label} not recorded for {b.missing} correct task{'s' * (b.missing != 1)}, "
                             "left out of its row")
        if s.not_judged:
            notes.append(f"{name}: {not_judged_text(s.not_judged)}, left out of every row (the judge's failure)")
    notes.append("correct / tasks: correct tasks placed against the baseline / fast_p's denominator (the judged tasks, a missing "
                 "or failed one counting as not fast, less the correct ones without that baseline). strict: TF32 off everywhere, "
                 "the reference every verdict is timed against; PyTorch defaults: what users run.")
    if with_device:
        notes.append("device: speedups on different devices are never averaged together; a task missing or failed before "
                     "the judge counts in its level's most common device's rows.")
    notes.append(f"speedups: {SPEEDUP_CREDIT} (docs/judge.md: Library calls and coverage).")
    t.caption = "\n".join(notes)
    return t
