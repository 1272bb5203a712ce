"""The template strategy on CPU: Triton GEMM templates rendered for every variant this Triton has,
judged by the real judge (Triton in interpreter mode), searched per shape without a model, resumed
after a judge budget stop, and handed to a model-led strategy with `--start best`."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kernelcraft.judge import Job, JudgeConfig, LocalPool, check_source
from kernelcraft.kernels.gemm import DeviceCaps, GemmConfig, TemplateError, config_space
from kernelcraft.kernels.gemm.triton import (VARIANTS, inline_sum, render, shared_memory, supported_variants,
                                             triton_has_descriptors)
from kernelcraft.tasks import Shape, hgemm_task

from .conftest import assert_exact_on_two_streams, binary_gemm_inputs, evaluate_all
from .fake_openai import FakeOpenAI
from .scripted import fenced, role
from .test_cli import FAST_RUN_TOML, kc, one_line_error

H100 = DeviceCaps("cuda", (9, 0), 132, 232448)
A100 = DeviceCaps("cuda", (8, 0), 108, 166912)
CPU = DeviceCaps("cpu")
# One configuration of each kind the template writes, small enough for the interpreter, with the
# kernels its forward launches.
KINDS = {GemmConfig(32, 32, 32, 8, 3, 4, 1, "tiled"): {"_gemm"},
         GemmConfig(32, 16, 32, 1, 3, 4, 4, "tiled"): {"_gemm_split"},  # slices summed by the tile's last program
         GemmConfig(64, 128, 32, 1, 3, 4, 16, "tiled"): {"_gemm_split", "_sum_splits"},  # too many bytes: a second kernel
         GemmConfig(16, 32, 32, 8, 3, 4, 1, "persistent"): {"_gemm_persistent"},
         GemmConfig(32, 32, 32, 8, 3, 4, 1, "tma"): {"_gemm_tma", "_gemm"},  # _gemm: rows descriptors cannot address
         GemmConfig(16, 16, 32, 2, 3, 4, 1, "tma_persistent"): {"_gemm_tma", "_gemm"}}
TARGET = ["hgemm", "--shapes", "64x64x64"]
SCREEN = JudgeConfig().with_overrides({"seeds": 2, "binary_seeds": 1, "timing": {
    "warmup_ms": 5.0, "min_iters": 5, "max_iters": 10, "target_ms": 20.0, "trusted_target_ms": 20.0}})


def _kinds_here() -> list[GemmConfig]:
    return [c for c in KINDS if not c.variant.startswith("tma") or triton_has_descriptors()]


# -- the templates ----------------------------------------------------------------------------
@pytest.mark.parametrize("config", _kinds_here(), ids=lambda c: c.name)
def test_every_variant_renders_a_candidate_the_static_checks_accept(config: GemmConfig) -> None:
    source = render(config)
    report = check_source(source)
    assert report.ok, report.message()
    assert "class ModelNew(nn.Module)" in source and "tl.float32" in source
    assert KINDS[config] <= report.kernel_names


def test_descriptor_variants_exist_only_where_triton_and_the_device_have_them() -> None:
    assert supported_variants(CPU) == supported_variants(A100) == ("tiled", "persistent")
    assert supported_variants(H100) == (VARIANTS if triton_has_descriptors() else ("tiled", "persistent"))
    with pytest.raises(TemplateError, match="split-K"):
        GemmConfig(64, 64, 32, split_k=2, variant="persistent")
    with pytest.raises(TemplateError, match="power of two"):
        GemmConfig(48, 64, 32)


def test_the_space_is_pruned_per_shape_and_ordered_by_the_prior() -> None:
    big = config_space(Shape(4096, 4096, 4096), H100)
    assert all(c.split_k == 1 for c in big)  # plenty of tiles: no split-K
    assert {c.variant for c in big} == set(supported_variants(H100))
    first = big[0]
    assert (first.block_m, first.block_n, first.block_k) in ((128, 256, 64), (256, 128, 64))
    assert all(shared_memory(c) <= H100.smem_bytes for c in big)
    # 128x256x64 in four stages: 192 KB of pipeline whose buffers take the output tile after the K loop,
    # except in a persistent kernel, which loads the next tile while it stores this one
    four = {c.variant for c in big if (c.block_m, c.block_n, c.block_k, c.stages) == (128, 256, 64, 4)}
    assert four == set(supported_variants(H100)) - {"persistent", "tma_persistent"}
    assert shared_memory(GemmConfig(128, 256, 64, stages=4, variant="persistent")) > H100.smem_bytes
    # the first few cover several output tiles and variants, not one tile's stage and warp variations;
    # descriptor kernels, whose per-call host time is as long as this kernel, come after them
    assert len({(c.variant, c.block_m, c.block_n) for c in big[:6]}) == 6
    assert not any(c.variant.startswith("tma") for c in big[:6])

    # descriptors built on every call cost more host time than a small GEMM's kernel takes
    assert not config_space(Shape(256, 64, 128), H100)[0].variant.startswith("tma")
    if "tma_persistent" in supported_variants(H100):
        assert config_space(Shape(8192, 12288, 12288), H100)[0].variant == "tma_persistent"

    long_k = config_space(Shape(64, 64, 8192), H100)
    assert all(c.block_m <= 64 and c.block_n <= 64 for c in long_k)
    assert not any(c.variant.endswith("persistent") for c in long_k)  # one wave of tiles: nothing to persist
    assert long_k[0].split_k > 1 and all(8192 // c.split_k >= 2 * c.block_k for c in long_k)

    odd = config_space(Shape(33, 47, 70), H100)
    assert not any(c.variant.startswith("tma") for c in odd)  # rows of 47 or 70 halves are not 16-byte aligned
    assert all(c.block_m <= 64 and c.block_n <= 64 and c.block_k <= 128 for c in odd)
    tiny = config_space(Shape(64, 64, 64), CPU)
    assert tiny[0] == GemmConfig(64, 64, 64, 8, 3, 4, 1, "tiled")


def test_every_variant_is_exact_on_a_ragged_shape_under_the_judge(cache_dir: Path) -> None:
    # 40x48x72: partial tiles in M and N, a K tail, an empty last split; rows aligned for descriptors
    task = hgemm_task(Shape(40, 48, 72))
    with LocalPool("cpu", cache_dir=cache_dir, config=SCREEN, workers=2) as pool:
        results = {r.job.tag: r.verdict for r in pool.map([Job(task, render(c), tag=c.name) for c in _kinds_here()])}
    for name, verdict in results.items():
        assert verdict is not None and verdict.correct, (name, verdict and verdict.message)
        assert len(verdict.stage("correctness").details["binary_exact"]) == 1  # the 0/1 inputs were compared exactly


@pytest.mark.gpu
def test_on_cuda_every_variant_is_exact_and_later_calls_launch_from_cpp(gpu_pool: LocalPool) -> None:
    """On a GPU the first call of a shape goes through Triton; the judge's later calls (the profiled one
    among them) are one C++ call that launches the compiled kernels, with the output still inside the
    judge's guard zone."""
    task = hgemm_task(Shape(40, 48, 72))
    results = evaluate_all(gpu_pool, [Job(task, render(c), tag=c.name, config=SCREEN) for c in KINDS])
    for config, kernels in KINDS.items():
        verdict = results[config.name].verdict
        assert verdict is not None and verdict.correct, (config.name, verdict and verdict.message)
        guards = verdict.stage("correctness").details["guard_zones"]["output"]
        assert all(g["armed"] and g["output_in_slot"] and g["breached_bytes"] == 0 for g in guards), guards
        coverage = verdict.stage("audit").details["coverage"]
        if not config.variant.startswith("tma"):  # descriptors are built per call: those stay with Triton
            assert set(coverage["calls"]) == {"ext:run"}, coverage["calls"]
            assert set(coverage["custom_kernels"]) == kernels, coverage


def test_split_k_sums_small_tiles_in_the_gemm_kernel_and_large_ones_in_a_second() -> None:
    assert inline_sum(GemmConfig(32, 32, 64, split_k=16)) and inline_sum(GemmConfig(64, 64, 64, split_k=16))
    assert not inline_sum(GemmConfig(256, 128, 64, split_k=16)) and not inline_sum(GemmConfig(128, 256, 64, split_k=4))
    assert "_sum_splits" not in render(GemmConfig(64, 64, 64, split_k=16))
    assert "_sum_splits" in render(GemmConfig(256, 128, 64, warps=8, split_k=16))


@pytest.mark.gpu
@pytest.mark.parametrize("config", [GemmConfig(32, 32, 64, 8, 3, 4, 8, "tiled"), GemmConfig(64, 128, 64, 8, 3, 4, 16, "tiled")],
                         ids=lambda c: c.name)
def test_on_cuda_split_k_sums_exactly_on_every_call_and_on_two_streams_at_once(
        config: GemmConfig, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Split-K, both ways of summing: where the last program of a tile to arrive sums the slices, it
    sets the tile's counter back to zero, so every later call (the C++ launcher's kept workspace) is
    exact too; two streams running the same shape at once each have their own workspace."""
    import importlib.util

    import torch

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(cache_dir / "torch_extensions"))
    path = tmp_path / "split_k_candidate.py"
    path.write_text(render(config))
    spec = importlib.util.spec_from_file_location("split_k_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew()
    assert module._NATIVE["module"] is not None, "the C++ launcher did not build"
    shape = (256, 192, 4096)  # 48 tiles of 8 slices, or 8 of 16
    gen = torch.Generator().manual_seed(0)
    for call in range(20):
        a, b, expected = binary_gemm_inputs(*shape, gen)
        assert torch.equal(model(a, b).cpu(), expected), f"call {call} is not exact"
    assert_exact_on_two_streams(model, shape, gen)


# -- the strategy -----------------------------------------------------------------------------
def _rows(ws: Path, sql: str) -> list[dict[str, Any]]:
    with sqlite3.connect(ws / "kernelcraft.db") as c:
        c.row_factory = sqlite3.Row
        return [dict(r) for r in c.execute(sql)]


@pytest.fixture(scope="module")
def template_run(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> dict[str, Any]:
    """A template search of a 64x64x64 GEMM with no model: stopped by its judge budget after two
    coarse evaluations, then resumed to the end."""
    cwd = tmp_path_factory.mktemp("template")
    (cwd / "fast.toml").write_text(FAST_RUN_TOML)
    args = ["optimize", *TARGET, "--strategy", "template", "--device", "cpu", "--configs", "3", "--finalists", "1",
            "--config", "fast.toml", "--json"]
    stopped = kc(*args, "--budget-judge-calls", "2", cwd=cwd, cache=cache_dir)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    run_id = json.loads(stopped.stdout)["run_id"]
    judged_first = _rows(cwd / "ws", "SELECT id FROM verdicts")
    resumed = kc("optimize", "--resume", run_id, "--budget-judge-calls", "10", "--json", cwd=cwd, cache=cache_dir)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return {"cwd": cwd, "stopped": stopped, "judged_first": len(judged_first),
            "result": json.loads(resumed.stdout)}


def test_template_search_screens_then_judges_the_finalist_in_full(template_run: dict[str, Any]) -> None:
    ws = template_run["cwd"] / "ws"
    rows = _rows(ws, "SELECT * FROM attempts ORDER BY turn, sample")
    metas = [json.loads(r["meta_json"]) for r in rows]
    assert [(r["sample"], r["turn"]) for r in rows] == [(0, 0), (1, 0), (2, 0), (s := rows[3]["sample"], 1)]
    assert all(r["status"] == "correct" and r["llm_call_id"] is None for r in rows)
    assert [m["stage"] for m in metas] == ["coarse"] * 3 + ["fine"]
    assert all(m["screening"] for m in metas[:3]) and "screening" not in metas[3]
    assert metas[0]["config"] == GemmConfig(64, 64, 64, 8, 3, 4, 1, "tiled").to_dict()
    assert s == max(range(3), key=lambda i: rows[i]["speedup"])  # the finalist is the fastest screened
    (task,) = template_run["result"]["tasks"]
    assert task["speedup"] == rows[3]["speedup"] and task["attempts"] == 4  # the result is the fine verdict
    assert "kernelcraft template GEMM" in Path(task["file"]).read_text()
    verdicts = _rows(ws, "SELECT id, context_hash FROM verdicts ORDER BY id")
    assert len({v["context_hash"] for v in verdicts[:3]}) == 1 and verdicts[3]["context_hash"] != verdicts[0]["context_hash"]
    assert _rows(ws, "SELECT count(*) AS n FROM llm_calls")[0]["n"] == 0
    report = Path(template_run["result"]["report"]).read_text()
    assert "coarse timing" in report and "fine timing" in report


def test_a_resumed_template_search_judges_nothing_twice(template_run: dict[str, Any]) -> None:
    assert "judge budget is spent" in template_run["stopped"].stderr
    assert template_run["judged_first"] == 2
    assert len(_rows(template_run["cwd"] / "ws", "SELECT id FROM verdicts")) == 4  # 2 + the last coarse + the fine


def test_start_best_shows_the_model_the_template_kernel_first(template_run: dict[str, Any], cache_dir: Path) -> None:
    cwd, ws = template_run["cwd"], template_run["cwd"] / "ws"
    best = Path(template_run["result"]["tasks"][0]["file"]).read_text()
    kernel = best[best.index("# kernelcraft template GEMM"):]  # past the header the run wrote

    def improve(messages: list[dict[str, Any]]) -> str:  # hands the kernel it is shown straight back
        assert role(messages) == "coder"
        return fenced(re.findall(r"```python\n(.*?)```", messages[-1]["content"], re.S)[-1])

    before = len(_rows(ws, "SELECT id FROM verdicts"))
    with FakeOpenAI(models=["fake-coder"], responder=improve) as srv:
        p = kc("optimize", *TARGET, "--model", "fake-coder", "--base-url", srv.url, "--strategy", "refine",
               "--samples", "1", "--turns", "1", "--start", "best", "--device", "cpu", "--config", "fast.toml", "--json",
               cwd=cwd, cache=cache_dir)
        first = srv.requests[0]["messages"]
    assert p.returncode == 0, p.stdout + p.stderr
    assert kernel.strip() in first[-1]["content"] and "Improve this kernel" in first[-1]["content"]
    (task,) = json.loads(p.stdout)["tasks"]
    assert task["speedup"] == template_run["result"]["tasks"][0]["speedup"]
    assert len(_rows(ws, "SELECT id FROM verdicts")) == before  # the same kernel in the same context: not judged again


def _first_finalist(template_run: dict[str, Any]) -> dict[str, Any]:
    """The meta of the fixture's run's one fine-stage attempt."""
    first = json.loads(template_run["stopped"].stdout)["run_id"]
    (fine,) = [json.loads(r["meta_json"]) for r in _rows(template_run["cwd"] / "ws",
                                                         f"SELECT meta_json FROM attempts WHERE run_id = '{first}' AND turn = 1")]
    return fine


def test_a_new_run_judges_what_earlier_runs_measured_fastest_first(template_run: dict[str, Any], cache_dir: Path) -> None:
    cwd, ws = template_run["cwd"], template_run["cwd"] / "ws"
    fine = _first_finalist(template_run)
    before = len(_rows(ws, "SELECT id FROM verdicts"))
    p = kc("optimize", *TARGET, "--strategy", "template", "--device", "cpu", "--configs", "1", "--finalists", "1",
           "--config", "fast.toml", "--json", cwd=cwd, cache=cache_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    rows = _rows(ws, f"SELECT sample, turn, meta_json FROM attempts WHERE run_id = '{run_id}'")
    # one configuration, the earlier run's finalist, judged once with the full recipe: no coarse stage
    assert [(r["sample"], r["turn"]) for r in rows] == [(0, 1)]
    assert json.loads(rows[0]["meta_json"])["config"] == fine["config"]
    # measured again, though the same kernel in the same context: it was carried over for its earlier
    # verdict, which as this run's result would be the luckiest of several measurements
    assert len(_rows(ws, "SELECT id FROM verdicts")) == before + 1
    resumed = kc("optimize", "--resume", run_id, "--json", cwd=cwd, cache=cache_dir)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(_rows(ws, "SELECT id FROM verdicts")) == before + 1  # its own verdict replayed, not measured a third time


def test_a_new_run_goes_on_to_configurations_no_run_has_judged(template_run: dict[str, Any], cache_dir: Path) -> None:
    cwd, ws = template_run["cwd"], template_run["cwd"] / "ws"
    fine = _first_finalist(template_run)
    metas = [json.loads(r["meta_json"]) for r in _rows(ws, "SELECT meta_json FROM attempts")]
    judged_before = {json.dumps(m["config"], sort_keys=True) for m in metas if "config" in m}  # the template's attempts
    p = kc("optimize", *TARGET, "--strategy", "template", "--device", "cpu", "--configs", "2", "--finalists", "1",
           "--config", "fast.toml", "--json", cwd=cwd, cache=cache_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    coarse = {r["sample"]: json.loads(r["meta_json"])["config"]
              for r in _rows(ws, f"SELECT sample, meta_json FROM attempts WHERE run_id = '{run_id}' AND turn = 0")}
    # the earlier finalist first, then a configuration that neither stage of any earlier run judged
    assert coarse[0] == fine["config"] and set(coarse) == {0, 1}
    assert json.dumps(coarse[1], sort_keys=True) not in judged_before


def test_under_another_judge_recipe_a_new_run_judges_the_earlier_fastest_again_first(
        template_run: dict[str, Any], cache_dir: Path) -> None:
    cwd, ws = template_run["cwd"], template_run["cwd"] / "ws"
    first = json.loads(template_run["stopped"].stdout)["run_id"]
    # The earlier run's last screened configuration (not the space's first) is made the fastest known.
    (last,) = _rows(ws, f"SELECT meta_json, verdict_id FROM attempts WHERE run_id = '{first}' AND turn = 0 AND sample = 2")
    with sqlite3.connect(ws / "kernelcraft.db") as c:
        c.execute("UPDATE verdicts SET effective_speedup = 9.0 WHERE id = ?", (last["verdict_id"],))
    (cwd / "other.toml").write_text(FAST_RUN_TOML.replace("[judge.timing]", "[judge.timing]\nwarmup_calls = 4"))
    before = len(_rows(ws, "SELECT id FROM verdicts"))
    p = kc("optimize", *TARGET, "--strategy", "template", "--device", "cpu", "--configs", "1", "--finalists", "1",
           "--config", "other.toml", "--json", cwd=cwd, cache=cache_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    (row,) = _rows(ws, f"SELECT meta_json FROM attempts WHERE run_id = '{run_id}'")
    assert json.loads(row["meta_json"])["config"] == json.loads(last["meta_json"])["config"]
    assert len(_rows(ws, "SELECT id FROM verdicts")) == before + 1  # judged again: another context's verdict is not reused


def test_a_template_candidate_names_its_configuration() -> None:
    for config in KINDS:
        assert GemmConfig.of_source(render(config)) == config
    assert GemmConfig.of_source("import torch\n") is None


@pytest.mark.parametrize("args, expected", [
    (["optimize", "leaky_relu_clamp", "--strategy", "template"], "leaky_relu_clamp is not a GEMM task"),
    (["optimize", *TARGET, "--strategy", "template", "--skills", "on"], "--model is required"),  # skills ask a model
    (["optimize", "leaky_relu_clamp", "--model", "m", "--strategy", "evolve", "--start", "best"], "(search.start)"),
])
def test_mistakes_are_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    assert expected in one_line_error(kc(*args, "--device", "cpu", cwd=tmp_path))
