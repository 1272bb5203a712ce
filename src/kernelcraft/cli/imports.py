"""`kernelcraft import-kernels`: a published kernel set wrapped as candidates, in eval-suite's layout."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Optional

import typer

from ..kernels.external import ImportFailed, import_kernel_set
from ..tasks import TaskError
from ..tasks.hgemm import HGEMM_SUITE, parse_shapes
from .app import app
from .common import JsonOpt, UsageError, out

MANIFEST = "import.json"


@app.command("import-kernels")
def import_kernels(kernel_set: str = typer.Argument(..., metavar="SET", help="The set's name: cuda-l2."),
                   path: Path = typer.Argument(..., help="Its kernels' folder, e.g. CUDA-L2/kernels/h100_F32F16F16F32."),
                   out_dir: Path = typer.Option(..., "--out", help="Where the wrapped candidates go (MxNxK.py each)."),
                   shapes: Optional[str] = typer.Option(None, "--shapes", help="Only these shapes, MxNxK,... (default: all the set has)."),
                   family: str = typer.Option(HGEMM_SUITE, "--family", help="The tasks to wrap them for: hgemm (C = A @ B, "
                                              "B row-major) or hgemm-wt (C = A @ W.T, W the N x K weight, as nn.Linear's)."),
                   as_json: bool = JsonOpt) -> None:
    """Wrap each kernel of a published set as a candidate for its shape's task (hgemm/MxNxK, or hgemm-wt/MxNxK), its
    origin and license in the source (KERNEL_ORIGIN), any layout change it needs made in forward (timed). Judge them
    with eval-suite."""
    try:
        asked = parse_shapes(shapes) if shapes is not None else None
    except TaskError as e:
        raise UsageError(f"--shapes: {e}") from None
    try:
        imported = import_kernel_set(kernel_set, path, asked, family)
    except ImportFailed as e:
        raise UsageError(str(e)) from None
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    for k in imported.kernels:
        (out_dir / f"{k.shape}.py").write_text(k.source)
    summary = {"set": kernel_set, "path": str(path), "family": family, "kernels": len(imported.kernels),
               "missing": [str(s) for s in imported.missing],
               "origins": {str(k.shape): k.origin for k in imported.kernels}}
    (out_dir / MANIFEST).write_text(json.dumps(summary, indent=1))
    judged = ",".join(str(k.shape) for k in imported.kernels)
    command = f"kernelcraft eval-suite {family} {shlex.quote(str(out_dir))} --device cuda --shapes {judged}"
    if as_json:
        print(json.dumps({**summary, "eval_suite": command}, indent=1))
        return
    out.print(f"{len(imported.kernels)} {kernel_set} kernel(s) wrapped into {out_dir} (origins in {MANIFEST})", highlight=False)
    if imported.missing:
        out.print(f"{len(imported.missing)} shape(s) asked have no kernel in the set, skipped: "
                  f"{', '.join(map(str, imported.missing[:10]))}{' ...' if len(imported.missing) > 10 else ''}", highlight=False)
    if imported.kernels:
        out.print(f"judge them: {command}", highlight=False, soft_wrap=True)
