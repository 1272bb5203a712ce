"""A published kernel set wrapped as candidates (`import-kernels`): a two-file fake of CUDA-L2's layout, written
here. Each kernel becomes a module defining ModelNew for its shape, its origin and license in KERNEL_ORIGIN, the
column-major copy of B made in forward where the kernel reads it; what the set lacks is counted, and bad input is one line. The real set is
judged on the GPU (tests/test_import_kernels_gpu.py)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest
import torch

from kernelcraft.judge.static import check_source
from kernelcraft.kernels.external import ImportFailed, import_kernel_set
from kernelcraft.kernels.external.imported import origin_of
from kernelcraft.tasks import resolve_target, resolve_task, shape_of
from kernelcraft.tasks.hgemm import Shape, hgemm_task

from .test_cli import kc, one_line_error

ENTRY = """
#include <torch/extension.h>
void cuda_l2_h100_fp32(torch::Tensor a, torch::Tensor b,
                       torch::Tensor b_col_major, torch::Tensor c) {{
  // {atom}
  CHECK_TORCH_TENSOR_SHAPE(b_col_major, b.size(0), b.size(1))
  c.copy_(torch::matmul(a, {read}));
}}
"""
MIT = "MIT License\n\nCopyright (c) 2025 someone\n\nPermission is hereby granted, free of charge, to any person..."


def fake_set(root: Path) -> Path:
    """CUDA-L2's layout: LICENSE.txt at the top, kernels/h100_F32F16F16F32/M_N_K.cu below."""
    kernels = root / "kernels" / "h100_F32F16F16F32"
    kernels.mkdir(parents=True)
    (root / "LICENSE.txt").write_text(MIT)
    # the first reads B's column-major copy, the second only checks its shape (as 224 of the real 1,000 do)
    (kernels / "64_128_256.cu").write_text(ENTRY.format(atom="using MMA = SM80_16x8x16_F16F16F16F16_TN;",
                                                        read="b_col_major.view({b.size(1), b.size(0)}).t()"))
    (kernels / "128_128_128.cu").write_text(ENTRY.format(atom="using MMA = SM80_16x8x16_F32F16F16F32_TN;", read="b"))
    (kernels / "README.md").write_text("not a kernel")
    return kernels


def test_each_kernel_becomes_a_candidate_that_names_its_origin(tmp_path: Path) -> None:
    imported = import_kernel_set("cuda-l2", fake_set(tmp_path / "CUDA-L2"))
    assert sorted(str(k.shape) for k in imported.kernels) == ["128x128x128", "64x128x256"] and imported.missing == []
    by_shape = {str(k.shape): k for k in imported.kernels}
    k = by_shape["64x128x256"]
    assert k.task_key == "hgemm/64x128x256"
    tree = ast.parse(k.source)
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    assert "cuda_l2_h100_fp32(a, b, b_col_major, c)" in k.source and "b.t().contiguous()" in k.source  # the copy is in forward
    origin = origin_of(k.source)
    assert origin == k.origin
    assert origin["set"] == "cuda-l2" and origin["license"] == "MIT"
    assert origin["file"] == "kernels/h100_F32F16F16F32/64_128_256.cu"
    assert origin["accumulator"] == "fp16"  # an fp16-accumulating atom, whatever the folder's label says
    assert by_shape["128x128x128"].origin["accumulator"] == "fp32"
    assert origin["layout"] == "B's column-major copy made in forward (timed)"
    assert check_source(k.source, enforce=True).ok  # what the judge will read first


def test_a_kernel_that_reads_only_the_row_major_b_gets_no_copy_to_time(tmp_path: Path) -> None:
    """A copy the kernel never reads would be timed as its work: B itself is passed (same dtype and shape)."""
    (k,) = import_kernel_set("cuda-l2", fake_set(tmp_path), [Shape(128, 128, 128)]).kernels
    assert "b.t().contiguous()" not in k.source and "b_col_major = b  #" in k.source
    assert k.origin["layout"] == "B as given (row-major), no copy"
    assert check_source(k.source, enforce=True).ok


MACRO_ENTRY = """
#include <torch/extension.h>
#define LAUNCH_TN(stages, stride)                              \\
  launch_tn<stages>(reinterpret_cast<half *>(a.data_ptr()),   \\
                    reinterpret_cast<half *>(b_col_major.data_ptr()), \\
                    reinterpret_cast<half *>(c.data_ptr()), M, N, K, (stride));
#define LAUNCH(stages) LAUNCH_TN(stages, 2048)
void cuda_l2_h100_fp32(torch::Tensor a, torch::Tensor b,
                       torch::Tensor b_col_major, torch::Tensor c) {
  CHECK_TORCH_TENSOR_SHAPE(b, a.size(1), c.size(1))
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  LAUNCH(6);
}
"""


def test_a_kernel_that_reads_the_copy_inside_its_launch_macro_gets_the_copy(tmp_path: Path) -> None:
    """CUDA-L2's launch macros read `b_col_major.data_ptr()` in their definitions, continued over lines, the entry
    point naming only the macro: the copy is made (B's row-major bytes in its place computed A @ B's wrong
    product, judged incorrect on the GPU)."""
    kernels = fake_set(tmp_path)
    (kernels / "64_128_256.cu").write_text(MACRO_ENTRY)
    (k,) = import_kernel_set("cuda-l2", kernels, [Shape(64, 128, 256)]).kernels
    assert k.origin["layout"] == "B's column-major copy made in forward (timed)" and "b.t().contiguous()" in k.source
    (w,) = import_kernel_set("cuda-l2", kernels, [Shape(64, 128, 256)], "hgemm-wt").kernels
    assert w.origin["layout"] == "W as B's column-major copy, no copy"  # B itself only asked for its size


class _FakeExtension:
    """What a CUDA-L2 kernel does with its arguments, on the CPU: reads B row-major (its data pointer, so B must be
    contiguous) or reads the column-major copy's bytes as B's in column-major order."""

    def __init__(self, reads: str) -> None:
        self.reads = reads

    def __getattr__(self, entry: str):
        def run(a: torch.Tensor, b: torch.Tensor, b_col_major: torch.Tensor, c: torch.Tensor) -> None:
            k, n = b.shape
            assert b_col_major.shape == (k, n), "the kernel's shape check"
            if self.reads == "row":
                assert b.is_contiguous(), "a kernel reading B's data pointer reads it row-major"
                c.copy_(a @ b)
            else:
                assert b_col_major.is_contiguous()
                c.copy_(a @ b_col_major.reshape(-1).view(n, k).t())
        return run


@pytest.mark.parametrize("family", ["hgemm", "hgemm-wt"])
@pytest.mark.parametrize("shape, reads", [(Shape(64, 128, 256), "col"), (Shape(128, 128, 128), "row")])
def test_the_wrapper_hands_each_kernel_b_as_it_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str,
                                                         shape: Shape, reads: str) -> None:
    """Run the wrapper's forward with the extension faked: whatever the family's input layout and whichever B the
    kernel reads, it computes the task's product (a layout slip would be an honest kernel judged incorrect)."""
    (k,) = import_kernel_set("cuda-l2", fake_set(tmp_path), [shape], family).kernels
    assert k.task_key == f"{family}/{shape}"
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda *args, **kwargs: _FakeExtension(reads))
    namespace: dict[str, object] = {}
    exec(compile(k.source, "wrapped.py", "exec"), namespace)
    model = namespace["ModelNew"]()
    task = hgemm_task(shape, family)
    a = torch.randn(shape.m, shape.k)
    second = torch.randn(shape.k, shape.n) if family == "hgemm" else torch.randn(shape.n, shape.k)
    expected = a @ second if family == "hgemm" else a @ second.t()
    torch.testing.assert_close(model(a, second), expected)
    reference: dict[str, object] = {}
    exec(compile(task.source, "task.py", "exec"), reference)  # the task's own Model computes the same product
    torch.testing.assert_close(reference["Model"]()(a, second), expected)
    assert task.key == k.task_key and check_source(k.source, enforce=True).ok


def test_the_weight_family_copies_only_what_a_kernel_reads(tmp_path: Path) -> None:
    by_shape = {str(k.shape): k for k in import_kernel_set("cuda-l2", fake_set(tmp_path), family="hgemm-wt").kernels}
    assert by_shape["64x128x256"].origin["layout"] == "W as B's column-major copy, no copy"
    assert ".contiguous()" not in by_shape["64x128x256"].source
    assert by_shape["128x128x128"].origin["layout"] == "B's row-major copy made from W in forward (timed)"
    # its own tasks, by name or by suite, kept out of hgemm's packs and template search (which go by hgemm's shapes)
    assert resolve_task("hgemm-wt/64x128x256").key == "hgemm-wt/64x128x256"
    assert [t.key for t in resolve_target("hgemm-wt", shapes=["64x128x256"])] == ["hgemm-wt/64x128x256"]
    assert shape_of(hgemm_task(Shape(64, 128, 256), "hgemm-wt")) is None


def test_shapes_the_set_lacks_are_counted_not_invented(tmp_path: Path) -> None:
    imported = import_kernel_set("cuda-l2", fake_set(tmp_path), [Shape(64, 128, 256), Shape(32, 32, 32)])
    assert [str(k.shape) for k in imported.kernels] == ["64x128x256"]
    assert imported.missing == [Shape(32, 32, 32)]


def test_a_kernel_without_its_entry_point_is_named(tmp_path: Path) -> None:
    kernels = fake_set(tmp_path)
    (kernels / "256_256_256.cu").write_text("__global__ void k() {}\n")
    with pytest.raises(ImportFailed, match="256_256_256.cu: no entry point"):
        import_kernel_set("cuda-l2", kernels)


def test_import_kernels_writes_an_eval_suite_folder(tmp_path: Path) -> None:
    kernels = fake_set(tmp_path / "CUDA-L2")
    p = kc("import-kernels", "cuda-l2", str(kernels), "--out", str(tmp_path / "wrapped"), "--shapes", "64x128x256,8x8x8",
           cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in (tmp_path / "wrapped").iterdir()) == ["64x128x256.py", "import.json"]
    manifest = json.loads((tmp_path / "wrapped" / "import.json").read_text())
    assert manifest["kernels"] == 1 and manifest["missing"] == ["8x8x8"]
    assert manifest["origins"]["64x128x256"]["license"] == "MIT"
    assert "1 shape(s) asked have no kernel in the set, skipped: 8x8x8" in p.stdout
    assert "kernelcraft eval-suite hgemm" in p.stdout and "--shapes 64x128x256" in p.stdout
    p = kc("import-kernels", "cuda-l2", str(kernels), "--out", str(tmp_path / "wt"), "--family", "hgemm-wt", "--json",
           cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["eval_suite"].startswith("kernelcraft eval-suite hgemm-wt ")


@pytest.mark.parametrize("args, message", [
    (["cuda-l2", "{empty}"], "no CUDA-L2 kernels here"),
    (["cuda-l2", "{missing}"], "no such directory"),
    (["cutlass-zoo", "{empty}"], "unknown kernel set 'cutlass-zoo'"),
    (["cuda-l2", "{kernels}", "--shapes", "64by128"], "--shapes"),
    (["cuda-l2", "{kernels}", "--family", "sgemm"], "unknown task family 'sgemm'"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "empty").mkdir()
    paths = {"empty": tmp_path / "empty", "missing": tmp_path / "nowhere", "kernels": fake_set(tmp_path / "set")}
    p = kc("import-kernels", *[a.format(**paths) for a in args], "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert message in one_line_error(p)


def test_the_wrapper_is_the_kernel_file_verbatim(tmp_path: Path) -> None:
    kernels = fake_set(tmp_path)
    (k,) = import_kernel_set("cuda-l2", kernels, [Shape(128, 128, 128)]).kernels
    namespace: dict[str, object] = {}
    tree = ast.parse(k.source)
    for node in tree.body:  # the module's constants, read without running it (it builds CUDA on import of ModelNew)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "_CUDA":
            namespace["_CUDA"] = ast.literal_eval(node.value)
    assert namespace["_CUDA"] == "\n" + (kernels / "128_128_128.cu").read_text()


def test_the_commit_of_a_checkout_is_recorded(tmp_path: Path) -> None:
    root = tmp_path / "CUDA-L2"
    kernels = fake_set(root)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "kernels"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (k, _) = import_kernel_set("cuda-l2", kernels).kernels
    assert k.origin["commit"] == head and k.origin["file"].startswith("kernels/h100_F32F16F16F32/")


def test_a_set_inside_another_projects_checkout_takes_no_commit_of_it(tmp_path: Path) -> None:
    outer = tmp_path / "project"
    kernels = fake_set(outer / "vendor" / "CUDA-L2")  # copied in, no checkout of its own
    subprocess.run(["git", "-C", str(outer), "init", "-q"], check=True)
    (k, _) = import_kernel_set("cuda-l2", kernels).kernels
    assert k.origin["commit"] is None and k.origin["file"].startswith("kernels/h100_F32F16F16F32/")
