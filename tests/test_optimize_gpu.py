"""`kernelcraft optimize` over the KernelBench sample's level 1 on a GPU, with an OpenAI-compatible
endpoint answering on loopback (no real endpoint is reachable from the GPU machine). ReLU gets a
kernel that does not compile, then a correct one; LayerNorm a wrong one; Softmax only prose.
ReLU's batch is cut from 4096 to 256 rows (6.4 GB to 0.4 GB per tensor), as in the throughput
benchmark: five seeds of full-size outputs, the reference's and the candidate's, would not fit
the GPU machine's 64 GB disk.
(`-m gpu`; skipped without a GPU. KERNELCRAFT_ARTIFACTS: where to copy the report and kernels.)"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from .fake_openai import FakeOpenAI
from .test_cli import FAST_RUN_TOML, kc

RELU = (Path(__file__).resolve().parent.parent / "benchmarks" / "candidates" / "19_ReLU_cuda.py").read_text()
BROKEN = RELU.replace("kb19_relu_f4", "kb19_relu_broken").replace("return y;", "return y")


def _reply(messages: list[dict[str, Any]]) -> str:
    task = messages[1]["content"]
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if "torch.relu(x)" in task:
        return f"A vectorised ReLU.\n```python\n{(BROKEN, RELU)[min(turn, 1)]}```"
    if "LayerNorm" in task:
        return f"```python\n{RELU}```"  # a ReLU is no layer norm: incorrect
    return "Softmax over such long rows needs an online reduction; I will think about it."


@pytest.mark.gpu
def test_optimize_level1_on_the_gpu(sample: Path, tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    level1 = shutil.copytree(sample / "level1", tmp_path / "level1")
    relu = level1 / "19_ReLU.py"
    relu.write_text(relu.read_text().replace("batch_size = 4096", "batch_size = 256"))
    with FakeOpenAI(models=["fake-coder"], responder=_reply) as srv:
        p = kc("optimize", "level1", "--model", "fake-coder", "--base-url", srv.url, "--device", "cuda",
               "--samples", "1", "--turns", "2", "--price", "fake-coder=0.5,1.5", "--config", "fast.toml", "--json",
               cwd=tmp_path, cache=cache_dir)
    print(p.stderr[-3000:])
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    tasks = {t["task"]: t for t in out["tasks"]}
    print(json.dumps(out, indent=1))
    with sqlite3.connect(tmp_path / "ws" / "kernelcraft.db") as c:
        for row in c.execute("SELECT task_key, turn, status, speedup, feedback FROM attempts ORDER BY task_key, turn"):
            print("[gpu] attempt", *row[:4], row[4][:400].replace("\n", " | "))
    keep = os.environ.get("KERNELCRAFT_ARTIFACTS")
    if keep:
        shutil.copytree(Path(out["report"]).parent, Path(keep) / "optimize-level1", dirs_exist_ok=True)
    assert tasks["level1/19_ReLU"]["speedup"] is not None and Path(tasks["level1/19_ReLU"]["file"]).is_file()
    assert tasks["level1/40_LayerNorm"]["speedup"] is None and tasks["level1/23_Softmax"]["speedup"] is None
    assert out["spend"]["calls"] == 6 and out["spend"]["cost_usd"] > 0
    assert "no correct candidate" in Path(out["report"]).read_text()


def _branch_reply(messages: list[dict[str, Any]]) -> str:
    system = messages[0]["content"]
    if "You do not write code" in system:
        return '```json\n{"ideas": ["128-bit vectorized loads and stores", "one thread per element, grid-stride"]}\n```'
    if "You choose which optimization" in system:
        return '```json\n{"skills": [{"name": "vectorized-loads", "reason": "a memory-bound elementwise op"}]}\n```'
    return f"```python\n{RELU if 'vectorized' in messages[1]['content'] else BROKEN}```"


@pytest.mark.gpu
def test_branch_with_skills_on_the_gpu(sample: Path, tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_RUN_TOML)
    relu = tmp_path / "19_ReLU.py"
    relu.write_text((sample / "level1" / "19_ReLU.py").read_text().replace("batch_size = 4096", "batch_size = 256"))
    with FakeOpenAI(models=["fake-coder"], responder=_branch_reply) as srv:
        p = kc("optimize", "19_ReLU.py", "--model", "fake-coder", "--base-url", srv.url, "--device", "cuda", "--strategy",
               "branch", "--turns", "2", "--width", "2", "--impls", "1", "--skills", "on", "--no-learn", "--config",
               "fast.toml", "--json", cwd=tmp_path, cache=cache_dir)
    print(p.stderr[-3000:])
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    print("[gpu] branch+skills", json.dumps(out["tasks"]))
    (task,) = out["tasks"]
    assert task["speedup"] is not None and task["attempts"] == 4
    html = Path(out["report"]).read_text()
    assert "vectorized-loads" in html and "128-bit vectorized loads" in html
