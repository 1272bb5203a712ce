"""Kernel packs on CPU: built from a real optimize run's verdicts, loaded, dispatched by shape, refused
when they do not belong here, timed; the padded-dispatch rule on hand-made manifests."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import kernelcraft.pack as kpack
from kernelcraft.judge.verdict import Flag, StageResult, Status, TimingStats, Verdict
from kernelcraft.pack import PackEntry, PackError, PackManifest, choose_padded, load, read_manifest
from kernelcraft.pack.bench import bench_pack, default_extra_shapes
from kernelcraft.pack.build import build_pack
from kernelcraft.pack.loader import current_device_name, installed_triton
from kernelcraft.store import Store
from kernelcraft.tasks import Shape, hgemm_task, resolve_task

from .fake_openai import FakeOpenAI
from .scripted import fenced
from .test_cli import FAST_TOML, as_run_file, kc, one_line_error

# An honest CPU kernel for the hgemm tasks: fp16 in and out, fp32 accumulation, any shape.
HGEMM_CPU = r'''# CPU candidate: fp16 GEMM C = A @ B in one C++ loop nest, accumulated in fp32 (B widened once).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <algorithm>
#include <vector>

torch::Tensor hgemm(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.device().is_cpu() && a.scalar_type() == torch::kHalf && b.scalar_type() == torch::kHalf,
                "fp16 CPU tensors expected");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "a (M x K) @ b (K x N) expected");
    a = a.contiguous();
    b = b.contiguous();
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    auto c = torch::empty({m, n}, a.options());
    const at::Half* A = a.data_ptr<at::Half>();
    const at::Half* B = b.data_ptr<at::Half>();
    at::Half* C = c.data_ptr<at::Half>();
    std::vector<float> wide(k * n), row(n);
    for (int64_t i = 0; i < k * n; ++i) wide[i] = static_cast<float>(B[i]);
    for (int64_t i = 0; i < m; ++i) {
        std::fill(row.begin(), row.end(), 0.f);
        for (int64_t p = 0; p < k; ++p) {
            const float av = static_cast<float>(A[i * k + p]);
            const float* bp = wide.data() + p * n;
            for (int64_t j = 0; j < n; ++j) row[j] += av * bp[j];
        }
        for (int64_t j = 0; j < n; ++j) C[i * n + j] = static_cast<at::Half>(row[j]);
    }
    return c;
}
"""

_ext = load_inline(name="kc_test_pack_hgemm", cpp_sources=[_CPP], functions=["hgemm"], extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.hgemm(a, b)
'''

SHAPES = [(64, 64, 32), (96, 64, 32)]
# The slowed-reference flag (which keeps a kernel out of a pack) measures the machine's load as much as
# the kernel on a tiny CPU task; these tests are about packs, so it is set out of reach.
SERVER_TOML = "slowed_reference_flag = 1000.0\nslowed_reference_reject = 2000.0\n" + FAST_TOML + "server = true\nserver_max_iters = 10\n"

# A pure-PyTorch stand-in for a kernel in hand-made packs: it records every call's shapes.
COUNTING = '''import torch
import torch.nn as nn

CALLS = []


class ModelNew(nn.Module):
    def forward(self, a, b):
        CALLS.append((tuple(a.shape), tuple(b.shape)))
        return torch.matmul(a.float(), b.float()).half()
'''


def _entry(m: int, n: int, k: int, *, reference_ms: float = 1.0, speedup: float = 4.0, server: float | None = None,
           sha: str = "") -> PackEntry:
    return PackEntry(m=m, n=n, k=k, kernel=f"kernels/{m}x{n}x{k}.py", sha256=sha, task=f"hgemm/{m}x{n}x{k}", verdict_id=1,
                     kernel_ms=reference_ms / speedup, reference_ms=reference_ms, speedup=speedup, speedup_server=server)


def _manifest(entries: list[PackEntry], **fields: Any) -> PackManifest:
    base = {"device": "cpu", "device_name": current_device_name("cpu"), "capability": "", "torch": torch.__version__,
            "triton": installed_triton(), "run_id": "hand-made", "created": "2026-01-01T00:00:00+00:00",
            "bandwidth_bytes_per_s": 1e11, "entries": entries}
    return PackManifest(**{**base, **fields})


def make_pack(root: Path, entries: list[PackEntry], **fields: Any) -> Path:
    """A pack of COUNTING kernels with these entries (sha256 filled in) and manifest fields."""
    import hashlib

    (root / "kernels").mkdir(parents=True)
    done = []
    for e in entries:
        data = f"# {e.name}\n{COUNTING}".encode()
        (root / e.kernel).write_bytes(data)
        done.append(dataclasses.replace(e, sha256=hashlib.sha256(data).hexdigest()))
    _manifest(done, **fields).write(root)
    return root


def _calls(pack: kpack.KernelPack, shape: tuple[int, int, int]) -> list:
    return pack.models[shape].forward.__globals__["CALLS"]


def _inputs(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(m * n * k)
    return (torch.randn(m, k, generator=g, dtype=torch.float16), torch.randn(k, n, generator=g, dtype=torch.float16))


def _close(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> bool:
    return c.dtype == torch.float16 and c.is_contiguous() and torch.allclose(
        c.float(), torch.matmul(a.float(), b.float()), atol=1e-2, rtol=1e-2)


# -- the padded-dispatch rule ---------------------------------------------------------------------
def test_padding_wins_when_the_kernel_is_much_faster() -> None:
    assert choose_padded([_entry(128, 128, 128, speedup=4.0)], 120, 128, 128, 1e11) is not None
    # 1.05x at its own shape cannot pay for padding and copies
    assert choose_padded([_entry(128, 128, 128, speedup=1.05)], 120, 128, 128, 1e11) is None
    # a kernel that loses under server traffic counts as losing
    assert choose_padded([_entry(128, 128, 128, speedup=4.0, server=0.9)], 120, 128, 128, 1e11) is None
    # a request much smaller than the shape: torch.matmul's time shrinks, the kernel's does not
    assert choose_padded([_entry(128, 128, 128, speedup=4.0)], 16, 128, 128, 1e11) is None


def test_padding_takes_the_smallest_covering_shape_that_wins() -> None:
    small, big = _entry(128, 128, 128, speedup=4.0), _entry(256, 256, 256, reference_ms=8.0, speedup=50.0)
    assert choose_padded([big, small], 120, 128, 128, 1e11) == small
    losing_small = _entry(128, 128, 128, speedup=1.0)
    assert choose_padded([big, losing_small], 120, 128, 128, 1e11) == big
    assert choose_padded([small], 120, 130, 128, 1e11) is None  # N not covered
    assert choose_padded([small], 120, 128, 128, 0.0) is None  # bandwidth unknown: no estimate, no padding


# -- dispatch -----------------------------------------------------------------------------------------
def test_dispatch_exact_padded_and_torch(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "p", [_entry(64, 64, 64, speedup=8.0), _entry(128, 64, 64, speedup=1.02)])
    pack = load(root)
    calls = _calls(pack, (64, 64, 64))
    a, b = _inputs(64, 64, 64)
    for _ in range(3):
        assert _close(pack.matmul(a, b), a, b)
    assert calls == [((64, 64), (64, 64))] * 3 and pack.route(a, b).kind == "exact"
    a, b = _inputs(48, 60, 40)  # padded to 64x64x64: the zero rows, columns and K terms change nothing
    assert _close(pack.matmul(a, b), a, b)
    assert calls[-1] == ((64, 64), (64, 64)) and pack.route(a, b).describe() == "padded to 64x64x64"
    before = len(calls)
    a, b = _inputs(100, 64, 64)  # covered only by 128x64x64, whose 1.02x cannot pay for padding
    assert _close(pack.matmul(a, b), a, b) and pack.route(a, b).reason == "padding estimated to lose"
    a, b = _inputs(64, 200, 64)
    assert _close(pack.matmul(a, b), a, b) and pack.route(a, b).reason == "no pack shape covers it"
    a, b = _inputs(64, 64, 64)
    assert pack.route(a.float(), b.float()).reason == "not float16"
    assert pack.route(b.t(), a.t()).reason == "non-contiguous input"
    assert len(calls) == before and _calls(pack, (128, 64, 64)) == []
    unmeasured = load(make_pack(tmp_path / "q", [_entry(64, 64, 64, speedup=8.0)], bandwidth_bytes_per_s=0.0))
    a, b = _inputs(48, 60, 40)
    assert unmeasured.route(a, b).reason == "no bandwidth recorded to estimate padding" and _close(unmeasured.matmul(a, b), a, b)


# -- refusals ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [("device_name", "NVIDIA H100 80GB HBM3"), ("torch", "2.0.0"), ("triton", "0.1.0")])
def test_refuses_another_device_or_version_unless_forced(tmp_path: Path, field: str, value: str) -> None:
    root = make_pack(tmp_path / "p", [_entry(64, 64, 64)], **{field: value})
    with pytest.raises(PackError) as e:
        load(root)
    assert value in str(e.value) and "force" in str(e.value) and "\n" not in str(e.value)
    pack = load(root, force=True)
    a, b = _inputs(64, 64, 64)
    assert _close(pack.matmul(a, b), a, b) and pack.route(a, b).kind == "exact"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a CUDA pack on a machine without CUDA")
def test_a_cuda_pack_does_not_load_without_cuda_even_forced(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "p", [_entry(64, 64, 64)], device="cuda", device_name="NVIDIA H100 80GB HBM3")
    with pytest.raises(PackError, match="no CUDA device"):
        load(root, force=True)


TRITON_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _mm(a, b, c, M, N, K, BLOCK: tl.constexpr):
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for i in range(0, tl.cdiv(K, BLOCK)):
        rk = i * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(a + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        y = tl.load(b + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        c = torch.empty(a.shape[0], b.shape[1], dtype=torch.float16)
        _mm[(triton.cdiv(a.shape[0], 32), triton.cdiv(b.shape[1], 32))](a, b, c, a.shape[0], b.shape[1], a.shape[1], BLOCK=32)
        return c
'''


def test_a_cpu_pack_of_triton_kernels_asks_for_the_interpreter_and_runs_under_it(tmp_path: Path) -> None:
    import hashlib

    root = tmp_path / "p"
    (root / "kernels").mkdir(parents=True)
    e = _entry(64, 64, 64)
    (root / e.kernel).write_text(TRITON_KERNEL)
    _manifest([dataclasses.replace(e, sha256=hashlib.sha256(TRITON_KERNEL.encode()).hexdigest())]).write(root)
    if os.environ.get("TRITON_INTERPRET") != "1":
        with pytest.raises(PackError, match=r"64x64x64\.py: a Triton kernel on a CPU runs only under Triton's interpreter"):
            load(root)
    script = ("import torch, kernelcraft.pack as kp; p = kp.load(__import__('sys').argv[1]); "
              "a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half(); "
              "assert p.route(a, b).kind == 'exact'; "
              "assert torch.allclose(p.matmul(a, b).float(), a.float() @ b.float(), atol=1e-1); print('ok')")
    run = subprocess.run([sys.executable, "-c", script, str(root)], env={**os.environ, "TRITON_INTERPRET": "1"},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_missing_kernel_file_is_named_and_falls_back_only_if_asked(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "p", [_entry(64, 64, 64), _entry(128, 128, 128)])
    (root / "kernels" / "64x64x64.py").unlink()
    with pytest.raises(PackError, match=r"kernels/64x64x64\.py") as e:
        load(root)
    assert "128x128x128" not in str(e.value)
    pack = load(root, fallback=True)
    assert pack.missing == ["kernels/64x64x64.py"]
    a, b = _inputs(64, 64, 64)
    route = pack.route(a, b)
    assert route.kind == "torch" and "missing" in route.reason and _close(pack.matmul(a, b), a, b)
    a, b = _inputs(128, 128, 128)
    assert pack.route(a, b).kind == "exact" and _close(pack.matmul(a, b), a, b)
    assert _calls(pack, (128, 128, 128)) == [((128, 128), (128, 128))]


def test_changed_kernel_file_is_refused(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "p", [_entry(64, 64, 64)])
    with open(root / "kernels" / "64x64x64.py", "a") as f:
        f.write("# edited\n")
    with pytest.raises(PackError, match=r"64x64x64\.py: contents differ from the manifest's sha256"):
        load(root, force=True, fallback=True)


def test_kernel_that_fails_to_import_is_named(tmp_path: Path) -> None:
    import hashlib

    root = make_pack(tmp_path / "p", [_entry(64, 64, 64)])
    data = b"import no_such_module_anywhere\n"
    (root / "kernels" / "64x64x64.py").write_bytes(data)
    m = read_manifest(root)
    dataclasses.replace(m, entries=[dataclasses.replace(m.entries[0], sha256=hashlib.sha256(data).hexdigest())]).write(root)
    with pytest.raises(PackError, match=r"64x64x64\.py: cannot load the kernel \(ModuleNotFoundError"):
        load(root)


def test_not_a_pack(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="no such pack directory"):
        load(tmp_path / "nothing")
    with pytest.raises(PackError, match="not a kernel pack"):
        load(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": 1, "entries": []}')
    with pytest.raises(PackError, match="unreadable manifest"):
        load(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": 99}')
    with pytest.raises(PackError, match="format 99"):
        load(tmp_path)
    good = make_pack(tmp_path / "p", [_entry(64, 64, 64)])
    manifest = json.loads((good / "manifest.json").read_text())
    for key, value, words in (("m", "sixtyfour", "m = 'sixtyfour': expected an integer"),
                              ("m", -64, r"shape \(-64, 64, 64\): dimensions must be positive"),
                              ("kernel_ms", "fast", "kernel_ms = 'fast': expected a number")):
        (good / "manifest.json").write_text(json.dumps({**manifest, "entries": [{**manifest["entries"][0], key: value}]}))
        with pytest.raises(PackError, match=words):
            load(good)


def test_loader_imports_only_the_standard_library_torch_and_triton() -> None:
    root = Path(kpack.__file__).parent
    allowed = set(sys.stdlib_module_names) | {"torch", "triton", "__future__"}
    for name, relative in (("loader.py", {"manifest", "prebuilt"}), ("manifest.py", set()), ("prebuilt.py", {"manifest"})):
        for node in ast.walk(ast.parse((root / name).read_text())):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= allowed, (name, ast.dump(node))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.level == 1 and node.module in relative, (name, ast.dump(node))
                else:
                    assert node.module.split(".")[0] in allowed, (name, node.module)


# -- bench -----------------------------------------------------------------------------------------------
def test_bench_times_pack_and_other_shapes_in_both_scenarios(tmp_path: Path) -> None:
    root = make_pack(tmp_path / "p", [_entry(64, 64, 64, speedup=8.0)])
    assert default_extra_shapes([(64, 64, 64), (32, 64, 64)]) == []  # 32x64x64 is in the pack; 0 rows is no shape
    rows = bench_pack(root, [(48, 64, 64), (64, 96, 64)], iters=3, qps=2000.0)
    assert [(r.shape, r.scenario) for r in rows] == [(s, sc) for s in ("64x64x64", "48x64x64", "64x96x64")
                                                     for sc in ("offline", "server")]
    by = {(r.shape, r.scenario): r for r in rows}
    assert by["64x64x64", "offline"].in_pack and not by["48x64x64", "offline"].in_pack
    assert by["64x64x64", "offline"].route == "pack kernel" and by["48x64x64", "server"].route == "padded to 64x64x64"
    assert by["64x96x64", "offline"].route == "torch.matmul (no pack shape covers it)"
    assert all(r.match and r.pack_ms > 0 and r.torch_ms > 0 for r in rows)
    assert all((r.overhead_us is not None) == (r.scenario == "offline") for r in rows)


# -- build from a store ------------------------------------------------------------------------------------
def test_build_refuses_unknown_runs_runs_without_gemms_and_occupied_dirs(tmp_path: Path) -> None:
    with Store(tmp_path / "ws") as store:
        with pytest.raises(PackError, match="no run 'nope'"):
            build_pack(store, "nope", tmp_path / "p")
        run_id = store.start_run("optimize", {})
        store.add_run_tasks(run_id, [resolve_task("leaky_relu_clamp")])
        with pytest.raises(PackError, match="no hgemm task"):
            build_pack(store, run_id, tmp_path / "p")
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("")
        with pytest.raises(PackError, match="not an empty directory"):
            build_pack(store, run_id, tmp_path / "full")


def _record(store: Store, run_id: str, task: Any, source: str, speedup: float, flags: tuple[str, ...] = (),
            alone_ms: float | None = None, env: dict[str, str] | None = None) -> int:
    """A correct verdict and its attempt, as a search would have recorded them (the reference timed at
    1 ms next to the kernel; `alone_ms`, its trusted time alone; `env`, the machine it names)."""
    v = Verdict(status=Status.CORRECT, task=task.key, device="cpu", speedup=speedup, significant=True,
                reference=TimingStats.of([1.0]), candidate=TimingStats.of([1.0 / speedup]), candidate_hash=source,
                trusted_reference=TimingStats.of([alone_ms]) if alone_ms else None,
                flags=[Flag(c, "") for c in flags], env=env or {"device_name": "cpu-x", "torch": "2.x", "triton": "3.x"},
                stages=[StageResult("audit", True, details={"ceilings": {"bandwidth_bytes_per_s": 5e10}})])
    vid = store.record_verdict(task, source, v, run_id=run_id)
    sample = len(store.attempts(run_id, task.key))
    store.record_attempt(run_id, task.key, sample, 0, status="correct", verdict_id=vid, speedup=speedup)
    return vid


def test_build_takes_the_best_unflagged_kernel_above_the_minimum(tmp_path: Path) -> None:
    tasks = [hgemm_task(Shape(64, 64, 32)), hgemm_task(Shape(128, 64, 32)), hgemm_task(Shape(256, 64, 32))]
    with Store(tmp_path / "ws") as store:
        run_id = store.start_run("optimize", {})
        store.add_run_tasks(run_id, tasks)
        _record(store, run_id, tasks[0], "# fast but flagged\n", 3.0, ("below_flop_floor",))
        clean = _record(store, run_id, tasks[0], "# clean\n", 1.5, ("noisy_timing",))
        _record(store, run_id, tasks[1], "# flagged\n", 2.0, ("side_stream",))
        _record(store, run_id, tasks[2], "# slow\n", 0.9)
        m = build_pack(store, run_id, tmp_path / "p")
    (e,) = m.entries
    assert (e.shape, e.verdict_id, e.speedup, e.speedup_server) == ((64, 64, 32), clean, 1.5, None)
    assert (tmp_path / "p" / e.kernel).read_text() == "# clean\n"
    assert m.left_out == {"hgemm/128x64x32": "every correct kernel is flagged (side_stream)",
                          "hgemm/256x64x32": "best kernel 0.90x is not above 1.00x (torch.matmul serves it)"}
    assert (m.device, m.device_name, m.torch, m.triton, m.bandwidth_bytes_per_s) == ("cpu", "cpu-x", "2.x", "3.x", 5e10)
    assert read_manifest(tmp_path / "p") == m


def test_a_kernel_that_slowed_the_reference_counts_its_speedup_over_the_reference_alone(tmp_path: Path) -> None:
    tasks = [hgemm_task(Shape(64, 64, 32)), hgemm_task(Shape(128, 64, 32))]
    with Store(tmp_path / "ws") as store:
        run_id = store.start_run("optimize", {})
        store.add_run_tasks(run_id, tasks)
        # 3.0x next to a reference that took 1 ms there and 0.5 ms alone: 1.5x over the reference alone
        _record(store, run_id, tasks[0], "# slowed it\n", 3.0, ("slowed_reference",), alone_ms=0.5)
        honest = _record(store, run_id, tasks[0], "# honest\n", 1.8)
        slowed = _record(store, run_id, tasks[1], "# slowed it too\n", 3.0, ("slowed_reference",), alone_ms=0.5)
        m = build_pack(store, run_id, tmp_path / "p")
    first, second = m.entries
    assert (first.verdict_id, first.speedup) == (honest, 1.8)  # 1.8x beats the 3.0x that is 1.5x honestly
    assert (second.verdict_id, second.reference_ms, second.speedup) == (slowed, pytest.approx(0.5), pytest.approx(1.5))
    assert second.kernel_ms == pytest.approx(1 / 3)


def test_a_pack_takes_each_shapes_best_kernel_from_any_run_and_names_its_source(tmp_path: Path) -> None:
    """A search's kernels and an imported set's (judged by eval-suite: verdicts, no attempts) in one pack."""
    a, b, c = hgemm_task(Shape(64, 64, 32)), hgemm_task(Shape(128, 64, 32)), hgemm_task(Shape(256, 64, 32))
    imported = "KERNEL_ORIGIN = {'set': 'cuda-l2', 'file': 'kernels/h100_F32F16F16F32/128_64_32.cu', 'license': 'MIT'}\n"
    with Store(tmp_path / "ws") as store:
        search = store.start_run("optimize", {})
        store.add_run_tasks(search, [a, b])
        ours_a = _record(store, search, a, "# ours, 64\n", 1.5)
        _record(store, search, b, "# ours, 128\n", 1.1)
        suite = store.start_run("eval-suite", {"suite": "hgemm"})
        theirs_b = _record_verdict(store, suite, b, imported, 1.4)
        _record_verdict(store, suite, c, imported.replace("128_64_32", "256_64_32"), 0.8)
        m = build_pack(store, [search, suite], tmp_path / "p")
    first, second = m.entries
    assert (first.shape, first.verdict_id, first.run_id, first.source, first.license) == ((64, 64, 32), ours_a, search, "kernelcraft", "")
    assert (second.shape, second.verdict_id, second.run_id, second.source, second.license, second.origin) == \
        ((128, 64, 32), theirs_b, suite, "cuda-l2", "MIT", "kernels/h100_F32F16F16F32/128_64_32.cu")
    assert m.runs == [search, suite] and m.run_id == search
    assert m.left_out == {"hgemm/256x64x32": "best kernel 0.80x is not above 1.00x (torch.matmul serves it)"}
    assert read_manifest(tmp_path / "p") == m
    assert f"runs {search}, {suite}" in (tmp_path / "p" / "README.txt").read_text()


def test_a_pack_mixing_a_search_and_an_imported_set_loads_and_runs_each_kernel(tmp_path: Path, cache_dir: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31's pack from any source, end to end on this machine: one shape's best kernel from a search,
    another's from an imported set, both real kernels; loaded, each shape runs its own kernel and the result is
    right, and a third shape falls to torch.matmul."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(cache_dir / "pack_extensions"))
    env = {"device_name": current_device_name("cpu"), "torch": torch.__version__, "triton": installed_triton()}
    imported = "KERNEL_ORIGIN = {'set': 'cuda-l2', 'file': 'kernels/x/96_64_32.cu', 'license': 'MIT'}\n" + HGEMM_CPU
    ours, theirs = hgemm_task(Shape(*SHAPES[0])), hgemm_task(Shape(*SHAPES[1]))
    with Store(tmp_path / "ws") as store:
        search = store.start_run("optimize", {})
        store.add_run_tasks(search, [ours])
        ours_id = _record(store, search, ours, HGEMM_CPU, 1.5, env=env)
        suite = store.start_run("eval-suite", {"suite": "hgemm"})
        theirs_id = _record_verdict(store, suite, theirs, imported, 1.4, env=env)
        m = build_pack(store, [search, suite], tmp_path / "p")
    assert [(e.shape, e.verdict_id, e.source) for e in m.entries] == [(SHAPES[0], ours_id, "kernelcraft"),
                                                                      (SHAPES[1], theirs_id, "cuda-l2")]
    pack = load(tmp_path / "p")
    served = []
    for shape, model in pack.models.items():
        real = model.forward
        model.forward = lambda a, b, shape=shape, real=real: served.append(shape) or real(a, b)
    for shape in SHAPES:
        a, b = _inputs(*shape)
        assert pack.route(a, b).kind == "exact" and _close(pack.matmul(a, b), a, b)
    a, b = _inputs(32, 32, 128)
    assert pack.route(a, b).kind == "torch" and _close(pack.matmul(a, b), a, b)
    assert served == SHAPES


def _record_verdict(store: Store, run_id: str, task: Any, source: str, speedup: float,
                    env: dict[str, str] | None = None) -> int:
    """A correct verdict as eval-suite records one: no attempt."""
    v = Verdict(status=Status.CORRECT, task=task.key, device="cpu", speedup=speedup, significant=True,
                reference=TimingStats.of([1.0]), candidate=TimingStats.of([1.0 / speedup]), candidate_hash=source,
                env=env or {"device_name": "cpu-x", "torch": "2.x", "triton": "3.x"})
    return store.record_verdict(task, source, v, run_id=run_id)


@pytest.fixture(scope="module")
def gemm_run(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[tuple[Path, str, Path]]:
    """An optimize run of two hgemm shapes on CPU, a scripted model answering HGEMM_CPU, and its pack
    (built by the CLI): (directory, run id, pack directory). Pack kernels build into the test cache."""
    root = tmp_path_factory.mktemp("gemm")
    (root / "fast.toml").write_text(as_run_file(SERVER_TOML))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_EXTENSIONS_DIR", str(cache_dir / "pack_extensions"))
        with FakeOpenAI(models=["fake-coder"], responder=lambda messages: fenced(HGEMM_CPU)) as srv:
            p = kc("optimize", "hgemm", "--shapes", ",".join("x".join(map(str, s)) for s in SHAPES), "--model", "fake-coder",
                   "--base-url", srv.url, "--device", "cpu", "--config", "fast.toml", "--turns", "1", "--samples", "1", "--json",
                   cwd=root, cache=cache_dir)
        assert p.returncode == 0, p.stdout + p.stderr
        run_id = json.loads(p.stdout)["run_id"]
        p = kc("pack", "build", run_id, "--out", "pack", "--min-speedup", "0", cwd=root)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "64x64x32" in p.stdout and "96x64x32" in p.stdout
        yield root, run_id, root / "pack"


def test_build_writes_kernels_manifest_and_loader(gemm_run: tuple[Path, str, Path]) -> None:
    root, run_id, pack_dir = gemm_run
    m = read_manifest(pack_dir)
    assert (m.device, m.device_name, m.torch, m.triton, m.run_id) == (
        "cpu", current_device_name("cpu"), torch.__version__, installed_triton(), run_id)
    assert m.bandwidth_bytes_per_s > 0 and m.dtype == "float16" and m.left_out == {}
    assert [e.shape for e in m.entries] == SHAPES
    with Store(root / "ws") as store:
        for e in m.entries:
            v = store.verdict(e.verdict_id)
            assert v.correct and e.task == f"hgemm/{e.name}" and store.candidate_source(e.verdict_id) == HGEMM_CPU
            assert (e.speedup, e.kernel_ms, e.reference_ms) == (v.speedup, v.candidate.median_ms, v.reference.median_ms)
            assert e.speedup_server == v.scenarios["server"]["speedup"] is not None
            assert (pack_dir / e.kernel).read_text() == HGEMM_CPU
    assert sorted(p.name for p in pack_dir.iterdir()) == ["README.txt", "kcpack", "kernels", "manifest.json"]
    assert "kernelcraft.pack.load" in (pack_dir / "README.txt").read_text()
    assert (pack_dir / "kcpack" / "loader.py").read_text() == Path(kpack.loader.__file__).read_text()


def test_loaded_pack_runs_its_kernels_and_torch_elsewhere(gemm_run: tuple[Path, str, Path], cache_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(cache_dir / "pack_extensions"))
    pack = load(gemm_run[2])
    model = pack.models[(64, 64, 32)]
    seen = []
    real = model.forward
    model.forward = lambda a, b: seen.append(a.shape) or real(a, b)  # counts the kernel's calls
    a, b = _inputs(64, 64, 32)
    assert _close(pack.matmul(a, b), a, b) and _close(pack.matmul(a, b), a, b)
    assert seen == [(64, 32)] * 2
    a, b = _inputs(64, 64, 64)  # K larger than every pack shape
    assert pack.route(a, b).kind == "torch" and _close(pack.matmul(a, b), a, b) and len(seen) == 2


def test_pack_loads_where_kernelcraft_is_not_imported(gemm_run: tuple[Path, str, Path], cache_dir: Path) -> None:
    pack_dir = gemm_run[2]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import torch, kcpack\n"
            "p = kcpack.load(sys.argv[1]); a = torch.ones(96, 32, dtype=torch.float16); b = torch.ones(32, 64, dtype=torch.float16)\n"
            "assert p.route(a, b).kind == 'exact' and bool((p.matmul(a, b) == 32).all())\n"
            "assert not [m for m in sys.modules if m.startswith('kernelcraft')], 'kernelcraft was imported'\n")
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache_dir / "pack_extensions")}
    p = subprocess.run([sys.executable, "-c", code, str(pack_dir)], check=False, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


_LOAD_AND_MULTIPLY = ("import sys; sys.path.insert(0, sys.argv[1]); import torch, kcpack\n"
                      "p = kcpack.load(sys.argv[1]); a = torch.ones(64, 32, dtype=torch.float16); b = torch.ones(32, 64, dtype=torch.float16)\n"
                      "assert p.route(a, b).kind == 'exact' and bool((p.matmul(a, b) == 32).all())\n")


def _load_without_a_compiler(pack_dir: Path, extensions_dir: Path) -> subprocess.CompletedProcess:
    """Load the pack and run a kernel in a process that finds no compiler and no ninja (nothing on PATH)
    and builds into an empty extensions directory."""
    env = {**os.environ, "PATH": str(extensions_dir / "no-bin"), "TORCH_EXTENSIONS_DIR": str(extensions_dir)}
    env.pop("CXX", None)
    return subprocess.run([sys.executable, "-c", _LOAD_AND_MULTIPLY, str(pack_dir)], check=False, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_compiled_pack_loads_where_nothing_can_compile(gemm_run: tuple[Path, str, Path], cache_dir: Path,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, run_id, plain = gemm_run
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(cache_dir / "pack_extensions"))
    p = kc("pack", "build", run_id, "--out", "compiled", "--min-speedup", "0", "--compile", "--json", cwd=root)
    assert p.returncode == 0, p.stdout + p.stderr
    pack_dir = root / "compiled"
    (ext,) = read_manifest(pack_dir).extensions  # both kernels make the same load_inline call: one library
    assert ext.module == "kc_test_pack_hgemm" and (pack_dir / ext.file).is_file() and ext.file.startswith("ext/")
    assert (pack_dir / "kcpack" / "prebuilt.py").is_file()
    # Without the shipped library the kernel must compile, and here it cannot; with it, nothing is built.
    failed = _load_without_a_compiler(plain, tmp_path / "ext-plain")
    assert failed.returncode != 0 and "cannot load the kernel" in failed.stderr, failed.stderr
    loaded = _load_without_a_compiler(pack_dir, tmp_path / "ext-compiled")
    assert loaded.returncode == 0, loaded.stderr
    assert not list((tmp_path / "ext-compiled").rglob("*.so"))
    # A library changed after the build is refused, by name.
    (pack_dir / ext.file).write_bytes((pack_dir / ext.file).read_bytes() + b"\0")
    with pytest.raises(PackError, match=f"{ext.file}: contents differ"):
        load(pack_dir)
    (pack_dir / ext.file).unlink()
    with pytest.raises(PackError, match="compiled library missing"):
        load(pack_dir)


def test_cli_show_and_bench(gemm_run: tuple[Path, str, Path], cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, run_id, _ = gemm_run
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(cache_dir / "pack_extensions"))
    p = kc("pack", "show", "pack", cwd=root)
    assert p.returncode == 0 and "64x64x32" in p.stdout and "kernels/96x64x32.py" in p.stdout and run_id in p.stdout
    p = kc("pack", "bench", "pack", "--iters", "3", "--qps", "2000", "--shapes", "40x64x32,64x64x64", cwd=root)
    assert p.returncode == 0, p.stdout + p.stderr
    for word in ("64x64x32", "96x64x32", "40x64x32", "64x64x64", "offline", "server", "pack vs torch.matmul"):
        assert word in p.stdout, word
    p = kc("pack", "bench", "pack", "--iters", "3", "--scenario", "offline", "--json", cwd=root)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["shape"]: r for r in json.loads(p.stdout)}
    assert set(rows) == {"64x64x32", "96x64x32", "32x64x32"}  # the default extra: 96x64x32 less 32 in M is in the pack
    assert rows["64x64x32"]["route"] == "pack kernel" and rows["64x64x32"]["overhead_us"] is not None
    assert all(r["match"] and r["scenario"] == "offline" for r in rows.values())


@pytest.mark.parametrize("args, words", [
    (["pack", "build", "no-such-run", "--out", "p2"], "no run 'no-such-run'"),
    (["pack", "show", "no/such/pack"], "no such pack directory"),
    (["pack", "bench", "ws"], "not a kernel pack"),
    (["pack", "bench", "pack", "--shapes", "64x64"], "expected MxNxK"),
    (["pack", "bench", "pack", "--scenario", "batch"], "expected offline, server or both"),
])
def test_cli_mistakes_are_one_line_errors(gemm_run: tuple[Path, str, Path], args: list[str], words: str) -> None:
    assert words in one_line_error(kc(*args, cwd=gemm_run[0]))


def test_cli_build_needs_a_workspace(tmp_path: Path) -> None:
    env_ws = tmp_path / "ws"
    assert "no kernelcraft workspace" in one_line_error(kc("pack", "build", "r", "--out", "p", cwd=tmp_path))
    assert not env_ws.exists()
