"""Shared fixtures: one CPU judge (and build cache) for the whole session, GPU tests skipped without a GPU."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from kernelcraft.judge import Job, Judge, JudgeConfig, LocalPool, Result

ROOT = Path(__file__).resolve().parent.parent
# KERNELCRAFT_KB_SAMPLE: where a GPU machine that has no ../shared finds the sample.
SAMPLE = Path(os.environ.get("KERNELCRAFT_KB_SAMPLE", ROOT.parent / "shared" / "kernelbench-sample"))
# A frontier model's replies (test data, read in place; KERNELCRAFT_CORPUS where it is not beside the checkout).
CORPUS = Path(os.environ.get("KERNELCRAFT_CORPUS", ROOT.parent / "shared" / "real-model-corpus"))
# KernelBench levels 1-3 (test data, read in place; KERNELCRAFT_KB where it is not beside the checkout).
KERNELBENCH = Path(os.environ.get("KERNELCRAFT_KB", ROOT.parent / "shared" / "kernelbench"))
CANDIDATES = ROOT / "examples" / "candidates"
# Test data read in place (scripts/gpu-check carries them to a GPU machine): a frontier model's replies, KernelBench.
CORPUS = Path(os.environ.get("KERNELCRAFT_CORPUS", ROOT.parent / "shared" / "real-model-corpus"))
KERNELBENCH = Path(os.environ.get("KERNELCRAFT_KB", ROOT.parent / "shared" / "kernelbench"))

# eval-suite and optimize would time torch.compile for every correct task (10-30 s each on a CPU): the commands
# under test skip it unless a test asks with --baselines.
os.environ.setdefault("KERNELCRAFT_BASELINES", "0")
# No precompiled torch/extension.h (judge/precompiled.py) but in its own test: making one takes a minute or two of a
# core per set of flags, more than the suite's few builds of each set save on a 2-core CI machine.
os.environ.setdefault("KERNELCRAFT_PCH_DIR", "off")

# Short timing: tests check verdicts, benchmarks check numbers.
FAST = JudgeConfig().with_overrides({
    "timing": {"warmup_ms": 5.0, "min_iters": 5, "max_iters": 40, "target_ms": 60.0},
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for every test (KERNELCRAFT_TEST_CACHE keeps it across runs), shared by the
    pytest-xdist workers of a run: each extension is compiled once, not once per worker (a C++
    build takes most of a minute on a 2-core CI machine). The cache is content-keyed and safe for
    concurrent processes, as a pool's workers use it; its device lock then spans the workers too."""
    keep = os.environ.get("KERNELCRAFT_TEST_CACHE")
    if keep:
        return Path(keep)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "cache"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def cpu_judge(cache_dir: Path) -> Judge:
    return Judge("cpu", cache_dir=cache_dir, config=FAST)


@pytest.fixture(scope="session")
def gpu_pool(cache_dir: Path) -> Iterator[LocalPool]:
    """GPU tests evaluate their candidates together on a pool: builds run in parallel."""
    with LocalPool("cuda", cache_dir=cache_dir, config=FAST, workers=8) as pool:
        yield pool


def evaluate_all(pool: LocalPool, jobs: list[Job]) -> dict[Any, Result]:
    """Every job's result by tag, printed as it completes (visible with -s even if a run is cut short)."""
    results = {}
    for r in pool.map(jobs):
        v = r.verdict
        print(f"[gpu] {r.job.tag}: {v.status.value if v else 'task_error'}: {(v.message if v else r.error)[:300]}", flush=True)
        results[r.job.tag] = r
    return results


@pytest.fixture(scope="session")
def sample() -> Path:
    if not SAMPLE.is_dir():
        pytest.skip("../shared/kernelbench-sample is not beside the checkout")
    return SAMPLE


def binary_gemm_inputs(m: int, n: int, k: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A and B on the GPU with sparse 0/1 entries, and their product: every sum is an integer below
    2048, exact in fp16 and in any order of summation, so a kernel's output must equal it bit for bit."""
    a = (torch.rand(m, k, generator=gen) < 0.1).half()
    b = (torch.rand(k, n, generator=gen) < 0.1).half()
    return a.cuda(), b.cuda(), (a.double() @ b.double()).half()


def assert_exact_on_two_streams(model: Any, shape: tuple[int, int, int], gen: torch.Generator,
                                rounds: int = 5, calls: int = 10) -> None:
    """Two streams running `model` on the same shape at once, `calls` calls each per round: every
    output exact (a workspace two streams shared would mix their partial sums)."""
    side = [torch.cuda.Stream(), torch.cuda.Stream()]
    for _ in range(rounds):
        pairs = [binary_gemm_inputs(*shape, gen) for _ in side]
        outputs = []
        for stream, (a, b, _) in zip(side, pairs):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                outputs.append([model(a, b) for _ in range(calls)])
        torch.cuda.synchronize()
        for results, (_, _, expected) in zip(outputs, pairs):
            assert all(torch.equal(c.cpu(), expected) for c in results)
