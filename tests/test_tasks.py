from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kernelcraft.tasks import (TaskError, check_sizes, find_solution, load_suite, load_task_file, named_task, resolve_task,
                               task_from_source)
from kernelcraft.tasks.loader import constant_values

SAMPLE_KEYS = {
    "level1/19_ReLU", "level1/23_Softmax", "level1/40_LayerNorm", "level2/1_Conv2D_ReLU_BiasAdd",
    "level2/12_Gemm_Multiply_LeakyReLU", "level2/76_Gemm_Add_ReLU", "level3/1_MLP", "level3/9_ResNet18",
    "level3/43_MinGPTCausalAttention",
}


def test_sample_tree_loads_with_levels_and_ids(sample: Path) -> None:
    tasks = load_suite(sample)
    assert {t.key for t in tasks} == SAMPLE_KEYS
    relu = next(t for t in tasks if t.key == "level1/19_ReLU")
    assert (relu.level, relu.problem_id, relu.name) == (1, 19, "ReLU")
    assert [t.level for t in tasks] == sorted(t.level for t in tasks)


def test_single_file_and_directory(sample: Path) -> None:
    (t,) = load_suite(sample / "level2" / "76_Gemm_Add_ReLU.py")
    assert t.level == 2 and t.problem_id == 76
    assert len(load_suite(sample / "level3")) == 3


def test_full_size_tree_of_270_problems(sample: Path, tmp_path: Path) -> None:
    """A KernelBench checkout: KernelBench/level1..4 with 100 + 100 + 50 + 20 problems."""
    files = sorted(sample.glob("level*/*.py"))
    for level, count in ((1, 100), (2, 100), (3, 50), (4, 20)):
        d = tmp_path / "KernelBench" / f"level{level}"
        d.mkdir(parents=True)
        for i in range(1, count + 1):
            shutil.copy(files[i % len(files)], d / f"{i}_Problem{i}.py")
    tasks = load_suite(tmp_path)
    assert len(tasks) == 270
    assert [sum(t.level == lv for t in tasks) for lv in (1, 2, 3, 4)] == [100, 100, 50, 20]
    assert tasks[0].key == "level1/1_Problem1" and tasks[99].key == "level1/100_Problem100"


def test_bundled_suite_has_metadata_and_sizes() -> None:
    tasks = load_suite("examples")
    assert len(tasks) >= 10
    for t in tasks:
        assert t.suite == "examples" and t.key == f"examples/{t.name}"
        assert t.meta.description and t.meta.tags
        assert t.sizes_for("cpu"), f"{t.key} has no CPU size"
    assert resolve_task("softmax_rows").key == "examples/softmax_rows"
    assert resolve_task("examples/softmax_rows").key == "examples/softmax_rows"


def test_with_sizes_overrides_per_device() -> None:
    t = resolve_task("softmax_rows").with_sizes("cpu", {"extra": 3})
    assert t.sizes_for("cpu")["extra"] == 3
    assert "extra" not in t.sizes_for("cuda")


@pytest.mark.parametrize("text, message", [
    ("import torch\nclass Model: pass\ndef get_inputs(): return []\n", "missing get_init_inputs"),
    ("def get_inputs():\n  return [\n", "syntax error"),
    ("class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\nKERNELCRAFT = {'dtype': 'int8'}\n", "dtype"),
    ("class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\nKERNELCRAFT = dict(a=1)\n", "literal dict"),
])
def test_bad_task_files_give_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "bad.py"
    p.write_text(text)
    with pytest.raises(TaskError) as e:
        load_suite(p)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_missing_paths() -> None:
    with pytest.raises(TaskError, match="no such"):
        load_suite("/nonexistent/tree")
    with pytest.raises(TaskError, match="no such task"):
        resolve_task("no_such_example")


def test_find_solution_by_problem(sample: Path, tmp_path: Path) -> None:
    tasks = {t.key: t for t in load_suite(sample)}
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text("x")
    (tmp_path / "level_2_problem_76_sample_0_kernel.py").write_text("x")
    (tmp_path / "40_LayerNorm.py").write_text("x")
    assert find_solution(tasks["level1/19_ReLU"], tmp_path) == tmp_path / "level1" / "19_ReLU.py"
    assert find_solution(tasks["level2/76_Gemm_Add_ReLU"], tmp_path).name.startswith("level_2_problem_76")
    assert find_solution(tasks["level1/40_LayerNorm"], tmp_path) == tmp_path / "40_LayerNorm.py"
    assert find_solution(tasks["level3/1_MLP"], tmp_path) is None


_SECRET = "kc_secret_line_4711"
_SIZED = ("import torch\nN = 4096\nSCALE = 0.5\nSHAPE = (N, 3)\nOFFSET = -2\nBIAS = True\nCFG = make()\n"
          "class Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


def test_constant_values_reads_literals_and_integer_arithmetic_without_executing() -> None:
    source = ("import torch\nN = 1 << 20\nM = 1024 * 2\nshape = (M, 3)\nLOW = -0.25\nname = 'gpt2'\nA, B = 1, 2\n"
              "C = 5\nC += 1\nHUGE = 2 ** 4096\nD = M // 0\ncfg = load(name)\nE: int = 7\nflag = True\n")
    assert constant_values(source) == {"N": 1 << 20, "M": 2048, "shape": (2048, 3), "LOW": -0.25, "name": "gpt2",
                                       "E": 7, "flag": True}


@pytest.mark.parametrize("sizes, words", [
    ({"N": 0}, "--set N=0: must be a positive integer (a size) (N = 4096 in t)"),
    ({"N": -5}, "--set N=-5: must be a positive integer"),
    ({"N": 2.5}, "--set N=2.5: must be an integer"),
    ({"N": True}, "--set N=True: must be an integer"),
    ({"SCALE": "x"}, "--set SCALE='x': must be a finite number"),
    ({"SCALE": float("inf")}, "--set SCALE=inf: must be a finite number"),
    ({"SHAPE": [4, 0]}, "--set SHAPE=[4, 0]: item 1 must be a positive integer"),
    ({"SHAPE": [4]}, "--set SHAPE=[4]: must be a list of 2 items"),
    ({"BIAS": 1}, "--set BIAS=1: must be true or false"),
    ({"NOPE": 1}, "--set NOPE: not a module-level constant of t (its constants: BIAS, CFG, N, OFFSET, SCALE, SHAPE)"),
])
def test_check_sizes_refuses_what_would_judge_another_or_a_degenerate_task(sizes: dict, words: str) -> None:
    task = task_from_source(_SIZED, "t")
    with pytest.raises(TaskError) as e:
        check_sizes(task, sizes)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)
    assert "its constants" not in e.value.reason and "4096" not in e.value.reason  # the reason quotes no source


def test_check_sizes_takes_values_of_each_constants_kind() -> None:
    task = task_from_source(_SIZED, "t")
    check_sizes(task, {"N": 16, "SCALE": 2, "SHAPE": (8, 3), "OFFSET": -7, "BIAS": False, "CFG": object()})
    check_sizes(task, {"OFFSET": 0, "SCALE": -1.5})  # an integer that is not positive in the task is no size


@pytest.mark.parametrize("text, reason", [
    (f"{_SECRET} = (\n", "not valid Python"),
    (f"{_SECRET} = 1\n", "not a KernelBench-format task (Model, get_inputs, get_init_inputs)"),
    ("class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
     f"KERNELCRAFT = {{'dtype': '{_SECRET}'}}\n", "its KERNELCRAFT metadata is invalid"),
    ("class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
     f"KERNELCRAFT = {{'tags': 3, 'x': '{_SECRET}'}}\n", "its KERNELCRAFT metadata is invalid"),
    (b"\xff" + _SECRET.encode(), "cannot be read as text"),
])
def test_a_task_errors_reason_quotes_nothing_of_the_file(tmp_path: Path, text: str | bytes, reason: str) -> None:
    p = tmp_path / "t.py"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(TaskError) as e:
        load_task_file(p)
    assert e.value.reason == reason and str(e.value).startswith(str(p))
    assert _SECRET not in e.value.reason


def test_named_task_reads_only_the_bundled_files() -> None:
    assert named_task("softmax_rows").key == "examples/softmax_rows"
    assert named_task("examples/softmax_rows").key == "examples/softmax_rows"
    assert named_task("hgemm/64x64x32").key == "hgemm/64x64x32"
    for spec in ("/etc/passwd", "../examples/softmax_rows", "..", "", "softmax_rows.py", "examples/../softmax_rows",
                 "no\x00such"):
        assert named_task(spec) is None, spec
    with pytest.raises(TaskError, match="hgemm/64x64x32,32x32x32: one shape names one task, not 2"):
        named_task("hgemm/64x64x32,32x32x32")
