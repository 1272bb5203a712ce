"""The candidates the GPU benchmarks evaluate: honest kernels for bundled tasks, for KernelBench
sample problems (from ../shared/kernelbench-sample, never copied) and for the red-team tasks."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcraft.tasks import Task, load_task_file, resolve_task

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = Path(os.environ.get("KERNELCRAFT_KB_SAMPLE", ROOT.parent / "shared" / "kernelbench-sample"))


@dataclass(frozen=True)
class BenchJob:
    task: Task
    candidate: Path
    label: str

    @property
    def source(self) -> str:
        return self.candidate.read_text()


@dataclass(frozen=True)
class _Spec:
    task: str
    candidate: str
    sizes: dict[str, Any] = field(default_factory=dict)


# KernelBench sample problems; 19_ReLU's batch is cut from 4096 to 256 rows (6.4 GB -> 0.4 GB per tensor).
_SAMPLE = [
    _Spec("level1/19_ReLU.py", "19_ReLU_triton.py", {"batch_size": 256}),
    _Spec("level1/19_ReLU.py", "19_ReLU_cuda.py", {"batch_size": 256}),
    _Spec("level2/76_Gemm_Add_ReLU.py", "76_Gemm_Add_ReLU_triton.py"),
    _Spec("level2/12_Gemm_Multiply_LeakyReLU.py", "12_Gemm_Multiply_LeakyReLU_triton.py"),
]
_REDTEAM_HONEST = ["honest_relu_triton.py:relu.py", "honest_scale_add_triton.py:scale_add.py",
                   "honest_row_softmax_triton.py:row_softmax.py", "honest_matmul_triton.py:matmul.py"]


def throughput_jobs() -> list[BenchJob]:
    jobs = [BenchJob(resolve_task(p.stem), p, f"examples/{p.stem}:{p.stem}")
            for p in sorted((ROOT / "examples" / "candidates" / "cuda").glob("*.py"))]
    for s in _SAMPLE:
        task = load_task_file(SAMPLE / s.task).with_sizes("cuda", s.sizes)
        jobs.append(BenchJob(task, ROOT / "benchmarks" / "candidates" / s.candidate, f"{task.key}:{s.candidate}"))
    red = ROOT / "tests" / "redteam"
    for item in _REDTEAM_HONEST:
        cand, task = item.split(":")
        jobs.append(BenchJob(load_task_file(red / "tasks" / task), red / "candidates" / cand, f"redteam/{task}:{cand}"))
    return jobs


def noise_jobs() -> list[BenchJob]:
    """Honest candidates of tasks whose reference runs for a millisecond or more on an H100."""
    wanted = {"examples/linear_bias_gelu", "examples/conv3x3_relu", "level2/76_Gemm_Add_ReLU"}
    return [j for j in throughput_jobs() if j.task.key in wanted]
