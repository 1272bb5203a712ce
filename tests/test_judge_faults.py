"""The judge at full scale, on the CPU: its own failures are judge_error and never the candidate's,
outputs pass to the trusted side without files, accuracy is decided against a float64 truth, and a
candidate's commands get timeouts scaled to the reference's time."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest
import torch

from kernelcraft.judge import Judge, JudgeConfig, Status, ceilings
from kernelcraft.judge.protocol import Facts
from kernelcraft.judge.timeouts import command_timeouts
from kernelcraft.judge.worker.compare import compare_with_truth
from kernelcraft.judge.worker.exchange import ExchangeError, SharedTensor, export_outputs, import_outputs
from kernelcraft.judge.worker.expected import Expected
from kernelcraft.judge.worker.loop import Worker, failure
from kernelcraft.tasks import resolve_task, task_from_source

from .conftest import FAST

SUM_TASK = """import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 8192))
    def forward(self, x):
        return (x @ self.weight.T).sum(dim=1, keepdim=True) / 2 * 1.5
def get_inputs():
    return [torch.randn(256, 8192)]
def get_init_inputs():
    return []
"""


# -- the tolerance rule ------------------------------------------------------------------------------
def _gemm_sum() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """level2/14's shape of error: a GEMM then a sum over 8192 values, in fp32 and exactly."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(256, 8192, generator=gen), torch.randn(64, 8192, generator=gen)
    truth = (x.double() @ w.double().T).sum(dim=1)
    return (x @ w.T).sum(dim=1), truth, (x.double() @ w.double().sum(0)).float()


def test_a_kernel_more_accurate_than_the_fp32_reference_passes_against_the_truth() -> None:
    ref, truth, rewrite = _gemm_sum()
    m = compare_with_truth(rewrite, ref, truth, 1e-4, 1e-4, 2.0)
    assert m.ok and m.truth and m.max_abs < m.ref_max_abs  # the rewrite in double is the closer one


def test_lower_precision_fails_against_the_truth_where_the_reference_error_is_far_smaller() -> None:
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(256, 8192, generator=gen), torch.randn(64, 8192, generator=gen)
    ref, truth = x @ w.T, x.double() @ w.double().T
    half = (x.half() @ w.half().T).float()
    m = compare_with_truth(half, ref, truth, 1e-4, 1e-4, 2.0)
    assert not m.ok and "float64 truth" in m.describe() and m.max_abs > 10 * m.ref_max_abs


@pytest.mark.parametrize(("ref", "got", "ok"), [
    (float("nan"), float("nan"), True), (float("nan"), 1.0, False), (float("inf"), float("inf"), True),
    (float("inf"), 1e38, False), (1.0, float("nan"), False), (1.0, 1.0 + 5e-5, True), (1.0, 1.0 + 5e-4, False),
])
def test_the_truth_rule_on_nan_infinity_and_tolerance(ref: float, got: float, ok: bool) -> None:
    r, g = torch.tensor([ref, 2.0]), torch.tensor([got, 2.0])
    m = compare_with_truth(g, r, r.double(), 1e-4, 1e-4, 2.0)
    assert m.ok is ok


def test_k_times_the_references_own_error_passes_beyond_the_tolerance() -> None:
    truth = torch.tensor([1.0], dtype=torch.float64)
    ref = torch.tensor([1.0 + 1e-3])  # a reference 1e-3 off the truth
    assert compare_with_truth(torch.tensor([1.0 - 1.9e-3]), ref, truth, 1e-4, 1e-4, 2.0).ok
    assert not compare_with_truth(torch.tensor([1.0 - 2.1e-3]), ref, truth, 1e-4, 1e-4, 2.0).ok


def test_expected_outputs_decide_a_double_precision_rewrite_against_the_truth() -> None:
    task = task_from_source(SUM_TASK, "sum_rewrite")
    from kernelcraft.tasks.runtime import build_model, exec_module, make_inputs
    module = exec_module(task.source, "task.py", "t")
    model = build_model(module.Model, [], 7, torch.device("cpu"), torch.float32)
    expected = Expected(model, lambda seed, p: make_inputs(module, seed, torch.device("cpu"), torch.float32, p),
                        torch.device("cpu"), torch.float32, cache_bytes=1 << 30, truth_max_bytes=1 << 30, truth_max_seconds=60)
    facts = expected.survey([11, 12], [])
    assert facts.truth == "float64" and facts.cached
    (x,) = make_inputs(module, 11, torch.device("cpu"), torch.float32)
    exact = ((x.double() @ model.weight.double().T).sum(dim=1, keepdim=True) / 2 * 1.5).float()
    (m,) = expected.compare("seed", 0, [exact], 1e-4, 1e-4, 2.0)
    assert m.ok and m.max_abs <= m.ref_max_abs
    (m,) = expected.compare("seed", 0, [exact.half().float()], 1e-4, 1e-4, 2.0)
    assert not m.ok


# -- outputs without files -----------------------------------------------------------------------
def test_cpu_outputs_pass_through_a_memory_file_and_come_back_bit_for_bit() -> None:
    import os
    fd = os.memfd_create("test")
    try:
        outs = [torch.randn(3, 5), torch.arange(7), 3.5, torch.randn(4, 6).t()]
        shared = export_outputs(outs, fd)
        back = import_outputs([SharedTensor.from_dict(d.to_dict()) if d else None for d in shared.tensors], fd)
        assert back[2] is None and all(torch.equal(a, b) for a, b in zip([outs[0], outs[1], outs[3]], [back[0], back[1], back[3]]))
        bad = SharedTensor.from_dict({**shared.tensors[0].to_dict(), "file_offset": 1 << 40})
        with pytest.raises(ExchangeError, match="past its memory file"):
            import_outputs([bad], fd)
    finally:
        os.close(fd)


# -- judge_error -------------------------------------------------------------------------------
def test_a_trusted_workers_lack_of_memory_or_disk_is_a_judge_error_and_a_candidates_is_not() -> None:
    trusted, candidate = Worker(), Worker()
    trusted.role, candidate.role = "reference", "candidate"
    assert failure(trusted, MemoryError()).status == "judge_error"
    assert failure(trusted, OSError(errno.ENOSPC, "No space left on device")).status == "judge_error"
    assert failure(trusted, ValueError("bad task")).status == "runtime_error"
    assert failure(candidate, MemoryError()).status == "runtime_error"
    oom = failure(candidate, torch.OutOfMemoryError("CUDA out of memory"))
    assert oom.status == "runtime_error" and oom.oom


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 1 MB filesystem for the judge's cache (needs mount rights, as root in CI)."""
    where = tmp_path / "tiny"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_is_a_judge_error_after_one_retry_never_the_candidates_failure(tiny_disk: Path, cache_dir: Path) -> None:
    Judge("cpu", cache_dir=cache_dir).ceilings()  # measured once per machine: the tiny disk takes the session's
    for name in (ceilings.FILE, ceilings.DIGEST_FILE):
        (tiny_disk / name).write_bytes((cache_dir / name).read_bytes())
    judge = Judge("cpu", cache_dir=tiny_disk, config=FAST)
    try:
        task = resolve_task("leaky_relu_clamp").with_sizes("cpu", {"N": 4096})
        big = "import torch\n" + "# padding\n" * 200_000 + "class ModelNew(torch.nn.Module):\n    pass\n"
        v = judge.evaluate(task, big)
    finally:
        judge.close()
    assert v.status is Status.JUDGE_ERROR, v.message
    assert "No space left on device" in v.message and len(v.env["judge_faults"]) == 2


# -- timeouts ------------------------------------------------------------------------------------
def test_timeouts_scale_with_the_reference_between_a_floor_and_the_stage_limit() -> None:
    cfg = JudgeConfig()
    fast = command_timeouts(cfg, Facts(call_s=0.003, input_s=0.001, cached=True), triton=False, cpu=False)
    assert fast.scaled and cfg.timeouts.floor < fast.run_seed < 2 * cfg.timeouts.floor
    assert fast.first_call == fast.run_seed and fast.timing < 60 and fast.profile < cfg.timeouts.profile
    # A spot check makes its round's inputs and runs the reference, whatever the trusted worker holds.
    assert fast.compare == cfg.timeouts.floor < fast.spot_check < 2 * cfg.timeouts.floor
    slow = command_timeouts(cfg, Facts(call_s=30.0, input_s=1.0), triton=False, cpu=False)
    assert slow.run_seed == cfg.timeouts.correctness and slow.timing == cfg.timeouts.timing
    jit = command_timeouts(cfg, Facts(call_s=0.003, input_s=0.001), triton=True, cpu=False)
    assert jit.first_call == pytest.approx(fast.run_seed + cfg.timeouts.first_call) and jit.run_seed == fast.run_seed
    interpreted = command_timeouts(cfg, Facts(call_s=0.003), triton=True, cpu=True)
    assert not interpreted.scaled and interpreted.run_seed == cfg.timeouts.correctness
    off = command_timeouts(cfg.with_overrides({"timeouts": {"scale": False}}), Facts(call_s=0.003), triton=False, cpu=False)
    assert off.run_seed == cfg.timeouts.correctness


def test_a_hung_candidate_on_a_fast_task_is_killed_at_its_scaled_timeout(cpu_judge: Judge) -> None:
    task = resolve_task("leaky_relu_clamp").with_sizes("cpu", {"N": 4096})
    hung = ("import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n"
            "    def forward(self, x):\n        while True:\n            pass\n")
    cfg = FAST.with_overrides({"timeouts": {"floor": 3.0}})
    v = cpu_judge.evaluate(task, hung, config=cfg)
    assert v.status is Status.TIMEOUT and "correctness" in v.message
    limit = float(v.message.split("no answer within ")[1].split(" s")[0])
    assert limit < cfg.timeouts.correctness / 10  # from the reference's time, not the stage's 300 s
