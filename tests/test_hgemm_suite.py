"""The hgemm suite: the shape grid, its stratified sample, shape lists, the tasks themselves, shapes
captured from a user's model, and the CLI options that choose them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kernelcraft.store import Store
from kernelcraft.tasks import (GRID_SIZES, Shape, Task, TaskError, TaskMeta, aspect_class, grid, hgemm_task, hgemm_tasks,
                               matmul_shapes, parse_shapes, resolve_task, sample_grid, shape_of, task_from_source,
                               volume_class)
from kernelcraft.tasks.runtime import exec_module, make_inputs

from .redteam.cases import TASKS_DIR
from .test_cli import kc, one_line_error

ASPECTS = {"square", "skinny_m", "skinny_n", "small_k", "large_k"}
VOLUMES = {"small", "medium", "large"}


# -- the grid and its sample ------------------------------------------------------------------
def test_the_grid_is_every_size_cubed() -> None:
    shapes = grid()
    assert len(shapes) == len(set(shapes)) == 1000 and shapes == sorted(shapes)
    assert {s.m for s in shapes} == {s.n for s in shapes} == {s.k for s in shapes} == set(GRID_SIZES)
    assert Shape(4096, 4096, 512) in shapes and Shape(12288, 64, 16384) in shapes
    assert str(Shape(4096, 2048, 512)) == "4096x2048x512" and Shape(2, 3, 4).flops == 48


def test_strata_classify_by_volume_and_aspect() -> None:
    assert [volume_class(Shape(*d)) for d in ((1024, 1024, 1024), (1024, 1024, 2048), (4096,) * 3, (8192, 4096, 4096))] \
        == ["small", "medium", "medium", "large"]
    assert aspect_class(Shape(4096, 2048, 1024)) == "square"
    assert aspect_class(Shape(64, 4096, 4096)) == "skinny_m"
    assert aspect_class(Shape(4096, 64, 4096)) == "skinny_n"
    assert aspect_class(Shape(4096, 4096, 512)) == "small_k"
    assert aspect_class(Shape(512, 512, 16384)) == "large_k"


def test_the_sample_is_deterministic_stratified_and_nested() -> None:
    sample = sample_grid(64)
    assert len(sample) == len(set(sample)) == 64 and set(sample) <= set(grid())
    assert sample == sample_grid(64) and sample != sample_grid(64, seed=1)
    strata = [(aspect_class(s), volume_class(s)) for s in sample]
    assert set(strata) == {(a, v) for a in ASPECTS for v in VOLUMES}  # all 15 strata
    assert {aspect_class(s) for s in sample_grid(5)} == ASPECTS
    assert {volume_class(s) for s in sample_grid(3)} == VOLUMES
    assert sample_grid(10) == sample[:10]  # a run cut short has still seen a spread
    assert sorted(sample_grid(1000)) == grid()


@pytest.mark.parametrize("n", [0, -3, 1001])
def test_a_sample_size_outside_the_grid_is_an_error(n: int) -> None:
    with pytest.raises(TaskError, match=f"sample {n}: must be a whole number between 1 and 1000"):
        sample_grid(n)


# -- shape lists ------------------------------------------------------------------------------
def test_parse_shapes_reads_mxnxk_lists() -> None:
    assert parse_shapes("4096x4096x512") == [Shape(4096, 4096, 512)]
    assert parse_shapes(" 64x128x32 , 8X16X24,64x128x32") == [Shape(64, 128, 32), Shape(8, 16, 24)]


@pytest.mark.parametrize("text, bad", [
    ("0x64x64", "'0x64x64': every dimension must be a positive integer"),
    ("64x64x64,64x0x64", "'64x0x64': every dimension must be a positive integer"),
    ("-64x64x64", "'-64x64x64': expected MxNxK"),
    ("4096x4096", "'4096x4096': expected MxNxK"),
    ("axbxc", "'axbxc': expected MxNxK"),
    ("64x64x64,,", "'': expected MxNxK"),
    ("1.5x2x2", "'1.5x2x2': expected MxNxK"),
    ("", "no shapes given"),
    ("  ", "no shapes given"),
])
def test_parse_shapes_names_the_bad_item(text: str, bad: str) -> None:
    with pytest.raises(TaskError, match=f"^(shape )?{bad}"):
        parse_shapes(text)


# -- the tasks --------------------------------------------------------------------------------
def test_a_task_is_a_kernelbench_gemm_of_its_shape() -> None:
    t = hgemm_task(Shape(4096, 4096, 512))
    assert (t.key, t.name, t.suite) == ("hgemm/4096x4096x512", "4096x4096x512", "hgemm")
    assert t.meta.dtype == "float16" and t.meta.tags == ("hgemm", "gemm")
    assert t.meta.checks == ("binary_exact", "guard_zones") and t.meta.sizes == {}
    assert "M = 4096\nN = 4096\nK = 512\n" in t.source and "return torch.matmul(a, b)" in t.source


def test_the_reference_is_an_fp16_matmul_on_the_cpu() -> None:
    t = hgemm_task(Shape(64, 128, 32))
    module = exec_module(t.source, "hgemm.py", "hgemm_task")
    a, b = make_inputs(module, 0, torch.device("cpu"), torch.float16)
    assert a.shape == (64, 32) and b.shape == (32, 128) and a.dtype == b.dtype == torch.float16
    c = module.Model(*module.get_init_inputs())(a, b)
    assert c.dtype == torch.float16 and c.shape == (64, 128)
    assert torch.equal(c, torch.matmul(a, b))
    torch.testing.assert_close(c.float(), a.double().matmul(b.double()).float(), atol=0.05, rtol=0.01)


def test_hgemm_tasks_chooses_grid_sample_or_list() -> None:
    assert len(hgemm_tasks()) == 1000
    assert [t.key for t in hgemm_tasks(sample=4)] == [f"hgemm/{s}" for s in sample_grid(4)]
    assert [t.key for t in hgemm_tasks(shapes=[Shape(8, 8, 8), Shape(16, 8, 4)])] == ["hgemm/8x8x8", "hgemm/16x8x4"]
    with pytest.raises(TaskError, match="not both"):
        hgemm_tasks(sample=4, shapes=[Shape(8, 8, 8)])
    with pytest.raises(TaskError, match="positive"):
        hgemm_task(Shape(8, -8, 8))


def test_shape_of_round_trips_through_the_store(tmp_path: Path) -> None:
    t = hgemm_task(Shape(4096, 2048, 512))
    assert shape_of(t) == Shape(4096, 2048, 512)
    with Store(tmp_path / "ws") as store:
        store.put_task(t)
        source = store.task_source(t.key)
    d = t.to_dict()
    back = Task(key=d["key"], name=d["name"], source=source, suite=d["suite"], meta=TaskMeta.from_dict(d["meta"]))
    assert shape_of(back) == shape_of(task_from_source(source, t.key)) == Shape(4096, 2048, 512)
    assert shape_of(replace(back, source="")) == Shape(4096, 2048, 512)  # the key alone is enough
    assert shape_of(resolve_task("softmax_rows")) is None
    assert shape_of(task_from_source(Path(TASKS_DIR / "hgemm.py").read_text(), "redteam/hgemm")) == Shape(192, 256, 1024)


# -- shapes from a model ----------------------------------------------------------------------
MODEL = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(32, width)

    def forward(self, x, y, z, w):
        h = self.proj(x)                  # (2, 5, 32) -> 10 x width x 32
        g = torch.matmul(h, y)            # (2, 5, width) @ (width, 16) -> 10 x 16 x width
        b = torch.bmm(z, w)               # 3 batches of (7, 9) @ (9, 11) -> 7 x 11 x 9
        return self.proj(x).sum() + g.sum() + b.sum()   # the same linear again: no new shape


class NoProduct(nn.Module):
    def forward(self, x, y, z, w):
        return x.relu()


def example_inputs():
    return [torch.randn(2, 5, 32), torch.randn(48, 16), torch.randn(3, 7, 9), torch.randn(3, 9, 11)]


def width():
    return [48]
'''


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "net.py"
    path.write_text(MODEL)
    return path


def test_matmul_shapes_records_each_product_once_in_order(model_file: Path) -> None:
    shapes = matmul_shapes(f"{model_file}:Net", f"{model_file}:example_inputs", f"{model_file}:width")
    assert shapes == [Shape(10, 48, 32), Shape(10, 16, 48), Shape(7, 11, 9)]


@pytest.mark.parametrize("model, inputs, message", [
    ("net.py:NoProduct", "net.py:example_inputs", "performed no matrix product"),
    ("net.py:Missing", "net.py:example_inputs", "no class Missing"),
    ("net.py", "net.py:example_inputs", "expected the model as PATH.py:NAME"),
    ("net.py:Net", "net.py:example_inputs", "forward pass on .* failed: TypeError"),  # no width given
    ("net.py:Net", "other.py:example_inputs", "other.py: no such file"),
])
def test_matmul_shapes_mistakes_are_one_line(model_file: Path, model: str, inputs: str, message: str) -> None:
    def here(spec: str) -> str:
        return spec.replace("net.py", str(model_file)).replace("other.py", str(model_file.parent / "other.py"))

    with pytest.raises(TaskError, match=message) as e:
        matmul_shapes(here(model), here(inputs))
    assert "\n" not in str(e.value)


# -- the command line -------------------------------------------------------------------------
def test_tasks_list_takes_shapes_samples_and_models(tmp_path: Path, model_file: Path) -> None:
    p = kc("tasks", "list", "hgemm", "--shapes", "64x64x64,128x64x32", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    listed = json.loads(p.stdout)
    assert [t["key"] for t in listed] == ["hgemm/64x64x64", "hgemm/128x64x32"]
    assert all(t["suite"] == "hgemm" and t["meta"]["dtype"] == "float16" for t in listed)
    p = kc("tasks", "list", "hgemm", "--sample", "5", "--json", cwd=tmp_path)
    assert [t["key"] for t in json.loads(p.stdout)] == [f"hgemm/{s}" for s in sample_grid(5)]
    p = kc("tasks", "list", "hgemm", "--from-model", f"{model_file}:Net", "--inputs", f"{model_file}:example_inputs",
           "--init-inputs", f"{model_file}:width", "--json", cwd=tmp_path)
    assert [t["key"] for t in json.loads(p.stdout)] == ["hgemm/10x48x32", "hgemm/10x16x48", "hgemm/7x11x9"]


@pytest.mark.parametrize("args, words", [
    (["tasks", "list", "hgemm", "--shapes", "64x64x0"], "shape '64x64x0': every dimension must be a positive integer"),
    (["tasks", "list", "hgemm", "--shapes", "64x64"], "shape '64x64': expected MxNxK"),
    (["tasks", "list", "hgemm", "--sample", "0"], "sample 0: must be a whole number between 1 and 1000"),
    (["tasks", "list", "examples", "--sample", "4"], "--sample chooses shapes of the hgemm suite only"),
    (["baseline", "examples", "--shapes", "64x64x64", "--device", "cpu"], "--shapes chooses shapes of the hgemm suite only"),
    (["eval-suite", "examples", ".", "--sample", "4", "--device", "cpu"], "--sample chooses shapes of the hgemm suite only"),
    (["optimize", "examples", "--sample", "4", "--strategy", "template"], "--sample chooses shapes of the hgemm suite only"),
    (["tasks", "list", "hgemm", "--sample", "4", "--shapes", "64x64x64"], "at most one of --sample, --shapes and --from-model"),
    (["tasks", "list", "hgemm", "--from-model", "net.py:Net"], "--from-model needs --inputs"),
    (["tasks", "list", "hgemm", "--inputs", "net.py:example_inputs"], "go with --from-model"),
    (["baseline", "hgemm", "--shapes", "64x64x64", "--set", "M=8", "--device", "cpu"], "--set does not apply to hgemm"),
    (["optimize", "--resume", "x", "--sample", "4"], "a resumed run keeps its own settings: drop --sample"),
])
def test_shape_option_mistakes_are_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    assert words in one_line_error(kc(*args, cwd=tmp_path))


def test_optimize_keeps_the_captured_shapes_for_resume(tmp_path: Path, model_file: Path) -> None:
    """A --from-model run saves the shapes it captured: resumed after the model changed, it has the same tasks."""
    args = ["--strategy", "template", "--device", "cpu", "--budget-wall-s", "0.001", "--json"]
    p = kc("optimize", "hgemm", "--from-model", f"{model_file}:Net", "--inputs", f"{model_file}:example_inputs",
           "--init-inputs", f"{model_file}:width", *args, cwd=tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr  # stopped by its budget before judging anything
    first = json.loads(p.stdout)
    keys = [t["task"] for t in first["tasks"]]
    assert keys == ["hgemm/10x48x32", "hgemm/10x16x48", "hgemm/7x11x9"]
    model_file.write_text(MODEL.replace("def width():\n    return [48]", "def width():\n    return [64]"))
    p = kc("optimize", "--resume", first["run_id"], "--budget-wall-s", "0.001", "--json", cwd=tmp_path)
    assert p.returncode == 3, p.stdout + p.stderr
    assert [t["task"] for t in json.loads(p.stdout)["tasks"]] == keys


def test_one_shape_resolves_by_its_key() -> None:
    from kernelcraft.tasks import resolve_task
    assert resolve_task("hgemm/64x128x32").key == "hgemm/64x128x32"
    with pytest.raises(TaskError, match="64x0x32"):
        resolve_task("hgemm/64x0x32")
