"""`kernelcraft profile`: judge one candidate, then show where it stands on the hardware: its roofline
and its top kernels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..judge import Judge, KernelProfiler
from ..report import kernel_table
from ..store import Store
from ..tasks import sized_task
from .app import app
from .common import (AtolOpt, ConfigOpt, DeviceOpt, JsonOpt, RtolOpt, SeedsOpt, SetOpt, WorkspaceOpt, candidate_source, judge_config,
                     out, print_verdict)


@app.command("profile")
def profile_cmd(task: str = typer.Argument(..., help="A task file or a bundled example name."),
                candidate: Path = typer.Argument(..., help="The candidate's Python file (defines ModelNew)."),
                device: str = DeviceOpt, workspace: Path = WorkspaceOpt, as_json: bool = JsonOpt, sets: list[str] = SetOpt,
                config: Optional[Path] = ConfigOpt, seeds: Optional[int] = SeedsOpt, atol: Optional[float] = AtolOpt,
                rtol: Optional[float] = RtolOpt) -> None:
    """Judge one candidate, then profile it if correct: its roofline (achieved TFLOP/s and GB/s against the device's
    ceilings) and its top kernels (Nsight Compute's metrics where ncu runs, else the PyTorch profiler's kernel list,
    with the reason). Exit 0 if correct, 1 otherwise."""
    t = sized_task(task, device, sets)
    source = candidate_source(candidate)
    cfg = judge_config(config, seeds, atol, rtol)
    kernels = None
    with Store(workspace) as store:
        judge = Judge(device, cache_dir=store.cache_dir, config=cfg)
        try:
            v = judge.evaluate(t, source)
        finally:
            judge.close()  # its workers would sit idle through the profile
        vid = store.record_verdict(t, source, v, origin=str(candidate))
        if v.correct:  # after the verdict, which it never changes
            kernels = KernelProfiler(device, cache_dir=store.cache_dir, config=cfg).profile(t, source)
            store.record_kernel_profile(vid, kernels)
    if as_json:
        print(json.dumps({"verdict_id": vid, **v.to_dict(), "kernels": kernels.to_dict() if kernels else None}, indent=1))
    else:
        print_verdict(v)
        if kernels is not None:
            out.print(kernel_table(kernels))
        else:
            out.print("not profiled: only a correct candidate is", highlight=False)
        out.print(f"verdict {vid} recorded in {store.path}", highlight=False)
    raise typer.Exit(0 if v.correct else 1)
