from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kernelcraft.tasks import TaskError, find_solution, load_suite, resolve_task

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


TUPLE_TASK = """import torch
SHAPE = (64, 32)
ROWS = 1 << 10
SCALE = 0.5
PADDING = 0
LOW = -2
class Model(torch.nn.Module):
    def forward(self, x):
        return x
def get_inputs():
    return [torch.randn(ROWS, *SHAPE)]
def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("sizes, refused", [
    ({"SHAPE": (128, 4)}, None), ({"ROWS": 8}, None), ({"SCALE": -1.0}, None), ({"PADDING": 2}, None), ({"LOW": -5}, None),
    ({"ROWS": 2.5}, None),  # what a computed constant is, unknown: only an integer is held to the rule
    ({"SHAPE": (0, 4)}, "SHAPE=(0, 4)"), ({"SHAPE": ()}, "SHAPE=()"), ({"ROWS": 0}, "ROWS=0"), ({"ROWS": -3}, "ROWS=-3"),
    ({"SHAPE": 64.0}, "SHAPE=64.0"), ({"SHAPE": (True, 1)}, "SHAPE=(True, 1)"),
])
def test_a_size_stays_a_positive_integer(sizes: dict, refused: str | None) -> None:
    from kernelcraft.tasks import check_sizes, task_from_source

    task = task_from_source(TUPLE_TASK, "t/sized")
    if refused is None:
        check_sizes(task, sizes)
        return
    with pytest.raises(TaskError, match=f"--set {re.escape(refused)}: .* is a size of t/sized, and a size is a positive integer"):
        check_sizes(task, sizes)
    with pytest.raises(TaskError, match=f"^sizes {re.escape(refused)}"):  # the reward service's name for them
        check_sizes(task, sizes, what="sizes")
