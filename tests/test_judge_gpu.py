"""The judge on a GPU: every bundled honest CUDA/Triton candidate passes; KernelBench's degenerate
softmax is flagged at its full size. (`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelcraft.judge import STAGES, Job, LocalPool, Result, Status
from kernelcraft.tasks import Shape, Task, hgemm_task, load_task_file, resolve_task
from kernelcraft.tasks.runtime import exec_module, make_inputs, torch_dtype

from .conftest import CANDIDATES, FAST, evaluate_all

CUDA_CANDIDATES = sorted((CANDIDATES / "cuda").glob("*.py"))


@pytest.fixture(scope="module")
def results(gpu_pool: LocalPool) -> dict[str, Result]:
    return evaluate_all(gpu_pool, [Job(resolve_task(p.stem), p.read_text(), tag=p.stem) for p in CUDA_CANDIDATES])


@pytest.mark.gpu
@pytest.mark.parametrize("path", CUDA_CANDIDATES, ids=[p.stem for p in CUDA_CANDIDATES])
def test_bundled_gpu_candidates_are_correct(path: Path, results: dict[str, Result]) -> None:
    v = results[path.stem].verdict
    assert v is not None, results[path.stem].error
    assert v.status is Status.CORRECT, v.message
    assert [s.name for s in v.stages] == list(STAGES)
    assert v.coverage > 0.5 and v.speedup > 0
    assert v.env["device_name"] and v.stage("timing").details["spot_checks"] >= 1


@pytest.mark.gpu
def test_full_size_softmax_of_the_sample_is_degenerate(gpu_pool: LocalPool, sample: Path) -> None:
    report = gpu_pool.judges[0].vet(load_task_file(sample / "level1" / "23_Softmax.py"))
    assert report["degenerate"]
    assert "zeros_pass" in {f["code"] for f in report["findings"]}


def _library_kernel(task: Task) -> str:
    """The name of the kernel torch.matmul spends the most device time in on this task's inputs."""
    import torch

    module = exec_module(task.source, "task.py", "decoy_task", task.sizes_for("cuda"))
    a, b = make_inputs(module, 0, torch.device("cuda"), torch_dtype(task.meta.dtype))
    torch.matmul(a, b)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    return max((e for e in prof.events() if e.device_type.name == "CUDA"),
               key=lambda e: e.time_range.end - e.time_range.start).name


@pytest.mark.gpu
def test_a_decoy_named_after_the_library_kernel_gets_no_credit(gpu_pool: LocalPool) -> None:
    """docs/judge.md, exploit class 10: cuBLAS does the product and the candidate's one small kernel bears the name
    of cuBLAS's kernel, which a coverage reject prints. The big kernel's launch call ran inside the
    aten::mm, so it stays the library's. The fp32 product's kernel is a templated
    CUTLASS name on some devices (an H100's), which a Triton kernel cannot take: then the fp16 one."""
    redteam = Path(__file__).parent / "redteam"
    for task in (load_task_file(redteam / "tasks" / "matmul.py"), hgemm_task(Shape(4096, 4096, 4096))):
        library = _library_kernel(task)
        if library.isidentifier():
            break
    else:
        pytest.skip(f"this device's matmul kernels have no plain name to imitate: {library[:80]}")
    decoy = (redteam / "candidates" / "10_decoy_trivial_part_gpu.py").read_text().replace("_epilogue_kernel", library)
    v = evaluate_all(gpu_pool, [Job(task, decoy, tag="decoy")])["decoy"].verdict
    assert v is not None
    coverage = v.stage("audit").details["coverage"]
    largest = coverage["kernels"][0]
    assert largest["name"] == library and not largest["own"] and largest["why_not"].startswith("launched inside aten::"), coverage
    assert v.coverage < 0.05 and (v.status is Status.HACK_DETECTED or "low_coverage" in {f.code for f in v.flags})
    # the verdict names the kernels that ran, and which of them the judge counted as the candidate's
    said = v.message if v.status is Status.HACK_DETECTED else next(f.message for f in v.flags if f.code == "low_coverage")
    assert f"kernels that ran: {library[:40]}" in said and "(not own: launched inside aten::" in said, said


@pytest.mark.gpu
def test_a_pool_over_two_gpus_judges_on_each(cache_dir: Path) -> None:
    """`--gpus 0,1`: one pool, one judge per device; each verdict names the device that gave it."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    jobs = [Job(resolve_task(p.stem), p.read_text(), tag=p.stem) for p in CUDA_CANDIDATES[:4]]
    with LocalPool("cuda", cache_dir=cache_dir, config=FAST, device_indices=[0, 1], workers=2) as pool:
        results = evaluate_all(pool, jobs)
    verdicts = [r.verdict for r in results.values()]
    assert all(v is not None and v.status is Status.CORRECT for v in verdicts), [r.error for r in results.values()]
    assert {v.env["device_index"] for v in verdicts if v is not None} == {0, 1}
    # and ran there: each index's workers on its own GPU (the worker reports the UUID of the GPU it runs on)
    uuids = {v.env["device_index"]: v.env["device_uuid"] for v in verdicts if v is not None}
    assert uuids == {i: str(torch.cuda.get_device_properties(i).uuid) for i in (0, 1)}


# LeakyReLU + clamp in CUDA with one instruction that only sm_90a has (`wgmma.fence`): ptxas refuses it for sm_90,
# so the build succeeds only for the architectures a Hopper wgmma kernel asks for, as the replies that asked for them
# (issue 45) did: TORCH_CUDA_ARCH_LIST set around load_inline, or a -gencode flag.
_SM90A = r'''
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void leaky_relu_clamp_sm90a(const float* x, float* y, int64_t n, float slope, float low, float high) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        v = v > 0.f ? v : v * slope;
        y[i] = fminf(fmaxf(v, low), high);
    }
}
torch::Tensor run(torch::Tensor x, double slope, double low, double high) {
    x = x.contiguous();
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    leaky_relu_clamp_sm90a<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n, (float)slope, (float)low, (float)high);
    return y;
}
"""


def _build(name, flags):
    return load_inline(name=name, cpp_sources="torch::Tensor run(torch::Tensor x, double slope, double low, double high);",
                       cuda_sources=_CUDA, functions=["run"], extra_cuda_cflags=flags)


BUILD


class ModelNew(nn.Module):
    def __init__(self, slope, low, high):
        super().__init__()
        self.slope, self.low, self.high = slope, low, high

    def forward(self, x):
        return _ext.run(x, self.slope, self.low, self.high)
'''
_BUILDS = {
    "arch_list": '''prev = os.environ.get("TORCH_CUDA_ARCH_LIST")
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
try:
    _ext = _build("kc_sm90a_arch_list", ["-O3"])
finally:
    if prev is None:
        os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
    else:
        os.environ["TORCH_CUDA_ARCH_LIST"] = prev''',
    "gencode": '''_ext = _build("kc_sm90a_gencode", ["-O3", "-gencode=arch=compute_90a,code=sm_90a"])''',
    "device_own": '''_ext = _build("kc_sm90a_device_own", ["-O3"])''',
}


@pytest.mark.gpu
def test_a_build_is_made_for_the_architectures_the_candidate_asks_for(gpu_pool: LocalPool) -> None:
    """Judge 17: a kernel that needs sm_90a builds when the candidate asks for sm_90a as plain PyTorch would take
    it (TORCH_CUDA_ARCH_LIST in its own environment around load_inline, or a -gencode flag), and only then (for
    the device's own architecture, 9.0, ptxas refuses it)."""
    import torch

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper GPU (sm_90a)")
    task = resolve_task("leaky_relu_clamp")
    results = evaluate_all(gpu_pool, [Job(task, _SM90A.replace("BUILD", build), tag=how) for how, build in _BUILDS.items()])
    for how in ("arch_list", "gencode"):
        v = results[how].verdict
        assert v is not None and v.status is Status.CORRECT, (how, results[how].error or v.message)
    own = results["device_own"].verdict
    if "9.0a" not in os.environ.get("TORCH_CUDA_ARCH_LIST", ""):  # the judge's own list, which a worker starts with
        assert own is not None and own.status is Status.BUILD_FAILED and "wgmma" in own.message, own.message if own else None
