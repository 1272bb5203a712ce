"""The template search's CUTLASS kernels: candidates the static checks accept, named so their
configuration comes back from the source, a space only where they run (Hopper, headers present),
the two families taking turns in the search's order, the CUDA source compiled by nvcc for sm_90a,
and on a Hopper GPU exact under the judge with its own kernel doing the work."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from torch.utils.cpp_extension import include_paths

from kernelcraft.judge import Job, LocalPool, check_source
from kernelcraft.kernels.gemm import (CutlassConfig, DeviceCaps, GemmConfig, TemplateError, config_from_dict, config_of_source,
                                      cutlass_include_dirs, cutlass_space, kernel_space, render_config, render_cutlass)
from kernelcraft.kernels.gemm.cutlass import NVCC_FLAGS, STREAMK_MIN_K, cutlass_prior, cutlass_runs_on, render_cuda
from kernelcraft.tasks import Shape, hgemm_task

from .conftest import assert_exact_on_two_streams, binary_gemm_inputs, evaluate_all
from .test_template_search import A100, H100, SCREEN

B200 = DeviceCaps("cuda", (10, 0), 148, 232448)
# One of each kind: cooperative with a cluster (its tiles walked along N), ping-pong, stream-K splitting K.
KINDS = [CutlassConfig(128, 128, 64, 2, 1, "cutlass_cooperative", "persistent", 4, raster="along_n"),
         CutlassConfig(64, 128, 64, 1, 1, "cutlass_pingpong", "persistent", 1),
         CutlassConfig(128, 128, 64, 1, 1, "cutlass_cooperative", "streamk", 1, 2)]


@pytest.mark.parametrize("config", KINDS, ids=lambda c: c.name)
def test_each_kind_renders_a_candidate_the_static_checks_accept(config: CutlassConfig) -> None:
    source = render_cutlass(config)
    report = check_source(source)
    assert report.ok, report.message()
    assert report.kernel_names == {"kc_cutlass_gemm"}  # the kernel is the candidate's own, not CUTLASS's device_kernel
    assert "class ModelNew(nn.Module)" in source and f'"kc_{config.binary}"' in source
    assert all(d in source for d in cutlass_include_dirs())
    assert config_of_source(source) == config and config_from_dict(config.to_dict()) == config
    assert render_config(config) == source


def test_configurations_differing_in_arguments_only_share_one_build() -> None:
    for a, b in ((KINDS[2], CutlassConfig(128, 128, 64, 1, 1, "cutlass_cooperative", "streamk", 4, 4)),
                 (KINDS[0], CutlassConfig(128, 128, 64, 2, 1, "cutlass_cooperative", "persistent", 4, raster="along_m"))):
        assert a.binary == b.binary and a.name != b.name
        assert render_cuda(a) == render_cuda(b) and render_cutlass(a) != render_cutlass(b)
    assert KINDS[0].name.endswith("_sw4_rn") and "RASTER = 2 " in render_cutlass(KINDS[0])
    assert "RASTER = 0 " in render_cutlass(KINDS[1])  # CUTLASS's heuristic where none is forced


@pytest.mark.parametrize("kwargs, words", [
    ({"tile_m": 64, "tile_n": 128}, "at least 128 rows"),
    ({"tile_m": 256, "tile_n": 128, "variant": "cutlass_pingpong"}, "at most 128 rows"),
    ({"tile_m": 128, "tile_n": 128, "variant": "cutlass_pingpong", "scheduler": "streamk"}, "cooperative kernel only"),
    ({"tile_m": 128, "tile_n": 96}, "multiples of 64"),
    ({"tile_m": 128, "tile_n": 128, "splits": 2}, "stream-K"),
    ({"tile_m": 128, "tile_n": 128, "cluster_m": 4}, "clusters"),
    ({"tile_m": 128, "tile_n": 128, "variant": "cutlass_basic"}, "unknown variant"),
    ({"tile_m": 128, "tile_n": 128, "raster": "diagonal"}, "unknown raster"),
])
def test_configurations_cutlass_cannot_build_are_refused(kwargs: dict, words: str) -> None:
    with pytest.raises(TemplateError, match=words):
        CutlassConfig(**kwargs)


def test_the_space_exists_only_on_hopper_with_aligned_rows() -> None:
    assert cutlass_runs_on(H100)
    for caps in (B200, A100, DeviceCaps("cpu")):  # sm_90a code runs on compute capability 9.0 only
        assert not cutlass_runs_on(caps) and cutlass_space(Shape(4096, 4096, 4096), caps) == []
    assert cutlass_space(Shape(4096, 4100, 4096), H100) == [] and cutlass_space(Shape(4096, 4096, 4100), H100) == []
    assert cutlass_space(Shape(4100, 4096, 4096), H100)  # M is free: the tensor memory accelerator clips rows


def test_stream_k_only_where_the_last_wave_is_partial_and_k_is_long() -> None:
    # 512x12288x12288 in 128x256 tiles: 192 tiles on 132 SMs, a last wave of 60, and 192 K steps to share out
    skinny = cutlass_space(Shape(512, 12288, 12288), H100)
    assert skinny[0].scheduler == "streamk"
    assert {c.scheduler for c in cutlass_space(Shape(512, 12288, 512), H100)} == {"persistent"}  # K too short
    assert 512 < STREAMK_MIN_K
    # 1056x4096 in 128x256 tiles: 9 x 16 = 144 tiles; in 128x128 tiles 288: neither is whole waves
    assert any(c.scheduler == "streamk" for c in cutlass_space(Shape(1056, 4096, 8192), H100))
    whole = cutlass_space(Shape(128 * 12, 128 * 11, 8192), H100)  # 132 tiles of 128x128: one whole wave
    assert all((c.tile_m, c.tile_n) != (128, 128) for c in whole if c.scheduler == "streamk")


def test_the_guess_charges_the_tiles_a_swizzle_pads_out() -> None:
    """CUTLASS rounds the tiles along each dimension up to whole swizzle x cluster groups: 512x8192 in
    128x256 tiles is 4 rows of tiles, which a 2x1 cluster at swizzle 4 pads to 8 (half the work is
    padding; measured 0.50x of swizzle 1 on an H100), and 1024 columns in 256-wide tiles are 4, which a
    1x2 cluster at swizzle 4 pads to 8 (0.42x)."""
    for shape, (cm, cn) in ((Shape(512, 8192, 8192), (2, 1)), (Shape(8192, 1024, 8192), (1, 2))):
        sw1, sw4 = (CutlassConfig(128, 256, 64, cm, cn, "cutlass_cooperative", "persistent", sw) for sw in (1, 4))
        assert cutlass_prior(sw4, shape, H100) < 0.55 * cutlass_prior(sw1, shape, H100)
    padded = CutlassConfig(128, 256, 64, 2, 1, "cutlass_cooperative", "persistent", 4)
    assert padded not in cutlass_space(Shape(512, 8192, 8192), H100)[:8]
    # 1x2 clusters are a configuration to ask for, not searched (RESULTS.md, fifteenth session)
    assert all(c.cluster_n == 1 for c in cutlass_space(Shape(8192, 1024, 8192), H100))
    both = CutlassConfig(128, 256, 64, 2, 1, "cutlass_cooperative", "persistent", 4)
    unpadded = Shape(8192, 8192, 8192)  # 64 x 32 tiles: whole groups of 8 and 4
    assert cutlass_prior(both, unpadded, H100) > cutlass_prior(CutlassConfig(128, 256, 64, 1, 1, "cutlass_cooperative", "persistent", 4), unpadded, H100)


def test_the_families_take_turns_with_cutlass_first_where_compute_bound() -> None:
    big = kernel_space(Shape(8192, 8192, 8192), H100)
    assert isinstance(big[0], CutlassConfig) and isinstance(big[1], GemmConfig)
    assert [type(c) for c in big[:6]] == [CutlassConfig, GemmConfig] * 3
    first = big[0]
    assert (first.tile_m, first.tile_n, first.cluster_m) in ((128, 256, 2), (256, 128, 2))
    small = kernel_space(Shape(256, 64, 128), H100)
    assert isinstance(small[0], GemmConfig) and isinstance(small[1], CutlassConfig)
    assert all(isinstance(c, GemmConfig) for c in kernel_space(Shape(8192, 8192, 8192), A100))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_the_kernel_and_its_binding_compile_for_sm90a(tmp_path: Path) -> None:
    """The judge's build without a GPU: nvcc compiles the kernel and its host entry points for sm_90a
    with the candidate's own flags, keeping the accumulators in registers (no spills), and the torch
    binding that calls them passes the C++ compiler."""
    source = tmp_path / "kernel.cu"
    source.write_text(render_cuda(KINDS[1]))
    include = [f"-I{d}" for d in cutlass_include_dirs()]
    p = subprocess.run(["nvcc", "-c", *NVCC_FLAGS, "-Xptxas", "-v", *include, str(source), "-o", str(tmp_path / "kernel.o")],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Compiling entry function '_Z15kc_cutlass_gemm" in p.stderr
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", p.stderr)]
    assert spills and not any(spills), p.stderr[-2000:]

    candidate = ast.parse(render_cutlass(KINDS[1]))
    binding = next(node.value.value for node in candidate.body
                   if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_CPP")
    (tmp_path / "binding.cpp").write_text(binding)
    torch_include = [f"-I{d}" for d in (*include_paths(), sysconfig.get_paths()["include"])]
    p = subprocess.run(["c++", "-fsyntax-only", "-std=c++17", *torch_include, str(tmp_path / "binding.cpp")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]


@pytest.mark.gpu
def test_on_hopper_each_kind_is_exact_and_its_own_kernel_does_the_work(gpu_pool: LocalPool) -> None:
    import torch

    if not cutlass_runs_on(DeviceCaps("cuda", torch.cuda.get_device_capability())):
        pytest.skip("CUTLASS's kernels are built for Hopper (compute capability 9.0) with its headers installed")
    # a ragged M (the last tile's rows clipped), and a shape with a partial last wave for stream-K
    tasks = [hgemm_task(Shape(40, 48, 72)), hgemm_task(Shape(1000, 1024, 2048))]
    jobs = [Job(t, render_cutlass(c), tag=f"{t.key}:{c.name}", config=SCREEN) for t in tasks for c in KINDS]
    results = evaluate_all(gpu_pool, jobs)
    for job in jobs:
        verdict = results[job.tag].verdict
        assert verdict is not None and verdict.correct, (job.tag, verdict and verdict.message)
        guards = verdict.stage("correctness").details["guard_zones"]["output"]
        assert all(g["armed"] and g["breached_bytes"] == 0 for g in guards), guards
        coverage = verdict.stage("audit").details["coverage"]
        assert set(coverage["custom_kernels"]) == {"kc_cutlass_gemm"} and coverage["coverage"] > 0.5, coverage


@pytest.mark.gpu
def test_on_hopper_stream_k_is_exact_on_every_call_and_on_two_streams_at_once(
        tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stream-K keeps one workspace per stream and its parameters on it, and zeroes the workspace's
    barrier flags before every launch: every call after the first is exact too (a flag left set
    would let a tile's fix-up read partial sums that were never written), two shapes take turns on
    one stream, and two streams running the same shape at once each have their own workspace."""
    import importlib.util

    import torch

    if not cutlass_runs_on(DeviceCaps("cuda", torch.cuda.get_device_capability())):
        pytest.skip("CUTLASS's kernels are built for Hopper (compute capability 9.0) with its headers installed")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(cache_dir / "torch_extensions"))
    path = tmp_path / "stream_k_candidate.py"
    path.write_text(render_cutlass(KINDS[2]))
    spec = importlib.util.spec_from_file_location("stream_k_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew()
    gen = torch.Generator().manual_seed(0)
    shapes = [(1000, 1024, 2048), (256, 512, 4096)]  # 64 and 8 tiles of 128x128 on 132 SMs: K is shared out
    for call in range(20):
        a, b, expected = binary_gemm_inputs(*shapes[call % 2], gen)
        assert torch.equal(model(a, b).cpu(), expected), f"call {call} is not exact"
    assert_exact_on_two_streams(model, shapes[0], gen)
