"""`kernelcraft bench` on a GPU: two KernelBench sample problems of two levels (ReLU, its batch cut to 256 rows as in
test_optimize_gpu; Gemm_Add_ReLU), two arms at two judge calls per task, a loopback endpoint answering with the
honest kernels of benchmarks/candidates, and the baselines timed on the device: every arm placed against eager
(strict), eager at PyTorch's defaults and torch.compile, per level and over both, and the plot against torch.compile.
(`-m gpu`; skipped without a GPU. KERNELCRAFT_ARTIFACTS: where to copy the bench's page.)"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .scripted import fenced
from .test_cli import FAST_RUN_TOML, kc

CANDIDATES = Path(__file__).resolve().parent.parent / "benchmarks" / "candidates"
KERNELS = {"level1/19_ReLU": (CANDIDATES / "19_ReLU_cuda.py").read_text(),
           "level2/76_Gemm_Add_ReLU": (CANDIDATES / "76_Gemm_Add_ReLU_triton.py").read_text()}


def _tasks(sample: Path, root: Path) -> dict[str, str]:
    """The two problems as a KernelBench tree under `root`; each task's source by key."""
    sources = {}
    for key in KERNELS:
        path = root / f"{key}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        source = (sample / f"{key}.py").read_text().replace("batch_size = 4096", "batch_size = 256")
        path.write_text(source)
        sources[key] = source.strip()
    return sources


@pytest.mark.gpu
def test_a_bench_on_the_gpu_places_every_arm_against_torch_compile(sample: Path, tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    sources = _tasks(sample, tmp_path / "kb")

    def reply(messages: list[dict[str, Any]]) -> str:  # the task's honest kernel, a distinct candidate per prompt
        text = "\n".join(m["content"] for m in messages)
        if "You do not write code" in messages[0]["content"]:
            return '```json\n{"ideas": ["vectorize"]}\n```'
        key = next(k for k, source in sources.items() if source in text)
        variant = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
        return fenced(KERNELS[key].replace("class ModelNew(", f"VARIANT = {variant}\n\n\nclass ModelNew(", 1))

    with FakeOpenAI(models=["fake-coder"], responder=reply) as srv:
        p = kc("bench", "kb", "--arm", "refine", "--arm", "evolve", "--task-judge-calls", "2", "--model", "fake-coder",
               "--base-url", srv.url, "--device", "cuda", "--config", "fast.toml", "--baselines", "--json", "-w", "ws",
               cwd=tmp_path, cache=cache_dir)
    print(p.stderr[-3000:])
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    print(json.dumps(out["rows"], indent=1))
    keep = os.environ.get("KERNELCRAFT_ARTIFACTS")
    if keep:
        shutil.copytree(tmp_path / "ws" / "results", Path(keep) / "bench", dirs_exist_ok=True)
    assert out["missing"] == {}, out["missing"]  # eager at the defaults and torch.compile timed for both tasks
    assert sorted({r["level"] for r in out["rows"]}) == ["all", "level 1", "level 2"]
    for arm in ("refine", "evolve"):
        (row,) = [r for r in out["rows"] if r["arm"] == arm and r["level"] == "all"]
        assert row["summary"]["correct"] == 2 and row["most_judge_calls"] <= 2, row
        against = {b["kind"]: b for b in row["summary"]["baselines"]}
        assert {"eager", "eager_default", "compile_default"} <= set(against), against
        assert all(b["geomean"] is not None for b in against.values())
        curve = [c for c in out["curves"] if c["arm"] == arm and c["level"] == "all" and c["kind"] == "compile_default"]
        assert len(curve) == 1 and all(v is not None for v in curve[0]["fast_1"])
    page = (tmp_path / "ws" / "results" / "bench.md").read_text()
    assert "fast_1 against torch.compile (PyTorch defaults) per judge call" in page
    assert (tmp_path / "ws" / "results" / "fast1-per-judge-call.png").stat().st_size > 0
