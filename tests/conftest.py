"""Shared fixtures: one CPU judge (and build cache) for the whole session, GPU tests skipped without a GPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelcraft.judge import Judge, JudgeConfig

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT.parent / "shared" / "kernelbench-sample"
CANDIDATES = ROOT / "examples" / "candidates"

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
    """One build cache for every test (KERNELCRAFT_TEST_CACHE keeps it across runs)."""
    keep = os.environ.get("KERNELCRAFT_TEST_CACHE")
    return Path(keep) if keep else tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def cpu_judge(cache_dir: Path) -> Judge:
    return Judge("cpu", cache_dir=cache_dir, config=FAST)


@pytest.fixture(scope="session")
def gpu_judge(cache_dir: Path) -> Judge:
    return Judge("cuda", cache_dir=cache_dir, config=FAST)


@pytest.fixture(scope="session")
def sample() -> Path:
    if not SAMPLE.is_dir():
        pytest.skip("../shared/kernelbench-sample is not beside the checkout")
    return SAMPLE
