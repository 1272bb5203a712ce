"""The judge on a GPU: every bundled honest CUDA/Triton candidate passes; KernelBench's degenerate
softmax is flagged at its full size. (`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations

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
