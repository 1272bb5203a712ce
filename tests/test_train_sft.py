"""The SFT export: a real store holding runs, model calls (with their prompt and reply files), attempts,
verdicts and skill candidates, exported to JSON lines, a `datasets` dataset and a summary."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# The train extra: absent on a bare GPU machine, where these CPU tests are skipped.
datasets = pytest.importorskip("datasets")
pytest.importorskip("datasketch")

from kernelcraft.judge import Flag, Status, TimingStats, Verdict  # noqa: E402
from kernelcraft.llm import CallRecord, ChatReply, ChatRequest, Message, Usage  # noqa: E402
from kernelcraft.search import VERIFY_BASE  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.tasks import Task, resolve_task  # noqa: E402
from kernelcraft.train.dedup import code_tokens, near_duplicates  # noqa: E402
from kernelcraft.train.sft import SFTExportConfig, SFTExportError, export_sft  # noqa: E402

RELU = '''import torch
from torch.utils.cpp_extension import load_inline

SOURCE = """
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0 ? x[i] : 0;
}
"""


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline("relu", cpp_sources="", cuda_sources=SOURCE, functions=["relu"])

    def forward(self, x):
        out = torch.empty_like(x)
        self.ext.relu(x, out)
        return out
'''
# RELU with comments, other blank lines and indentation inside the kernel, and its own names changed
RELU_RENAMED = '''import torch
from torch.utils.cpp_extension import load_inline

# the kernel
KERNEL_SRC = """
__global__ void relu_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;   /* one thread per element */

  if (i < n) y[i] = x[i] > 0 ? x[i] : 0;
}
"""


class FastRelu(torch.nn.Module):
    def __init__(me):
        super().__init__()
        me.ext = load_inline("relu", cpp_sources="", cuda_sources=KERNEL_SRC, functions=["relu"])  # build once

    def forward(me, inp):

        result = torch.empty_like(inp)
        me.ext.relu(inp, result)
        return result
'''
SIGMOID = '''import torch
import triton
import triton.language as tl


@triton.jit
def sigmoid_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 1.0 / (1.0 + tl.exp(-v)), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        grid = (triton.cdiv(x.numel(), 1024),)
        sigmoid_kernel[grid](x, y, x.numel(), BLOCK=1024)
        return y
'''
ROWSUM = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_sum(src, dst, cols, stride, TILE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([TILE], dtype=tl.float32)
    for start in range(0, cols, TILE):
        idx = start + tl.arange(0, TILE)
        acc += tl.load(src + row * stride + idx, mask=idx < cols, other=0.0)
    tl.store(dst + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def forward(self, a):
        rows, cols = a.shape
        res = a.new_empty(rows)
        row_sum[(rows,)](a, res, cols, a.stride(0), TILE=256)
        return res
'''


def _verdict(task_key: str, source: str, status: str, speedup: float | None, flags: tuple[str, ...] = ()) -> Verdict:
    digest = hashlib.sha256(source.encode()).hexdigest()
    if status != "correct":
        return Verdict(status=Status(status), task=task_key, device="cpu", message=f"{status}: max abs error 0.5",
                       candidate_hash=digest)
    assert speedup is not None
    return Verdict(status=Status.CORRECT, task=task_key, device="cpu", message="correct", speedup=speedup, significant=True,
                   reference=TimingStats.of([2.0, 2.1, 2.2]), candidate=TimingStats.of([2.0 / speedup] * 3), coverage=0.9,
                   flags=[Flag(code, "a person should look") for code in flags], candidate_hash=digest)


@dataclass
class RunBuilder:
    """A synthetic run, recorded through the store's public methods as a search records one."""

    store: Store
    tasks: dict[str, Task] = field(default_factory=dict)
    run: str = ""

    def __post_init__(self) -> None:
        self.run = self.store.start_run("optimize", {})

    def task(self, name: str) -> Task:
        if name not in self.tasks:
            self.tasks[name] = resolve_task(name)
            self.store.add_run_tasks(self.run, [self.tasks[name]])
        return self.tasks[name]

    def call(self, role: str, task: str, sample: int, reply: str | None, prompt: str = "") -> int:
        messages = (Message("system", f"you are the {role}"), Message("user", prompt or f"{role} {task} sample {sample}"))
        request = ChatRequest(model="fake-model", messages=messages, sample=sample, purpose=role, task=self.task(task).key)
        answer = None if reply is None else ChatReply(text=reply, usage=Usage(10, 20), model="fake-model",
                                                      finish_reason="stop", latency_s=0.1, cost_usd=None)
        return self.store.record_llm_call(CallRecord(request, answer, error=None if answer else "HTTP 500"), self.run)

    def coder(self, task: str, sample: int, turn: int, source: str | None, status: str = "correct",
              speedup: float | None = None, flags: tuple[str, ...] = (), meta: dict[str, Any] | None = None,
              by_model: bool = True) -> int:
        """One coder turn: the model's call (its reply holds `source`), the verdict, the attempt."""
        t = self.task(task)
        reply = f"Here is my kernel.\n```python\n{source}```" if source is not None else "I cannot do this."
        call_id = self.call("coder", task, sample, reply, prompt=f"write {task} (sample {sample}, turn {turn})") \
            if by_model else None
        verdict_id = None
        if source is not None:
            verdict_id = self.store.record_verdict(t, source, _verdict(t.key, source, status, speedup, flags), run_id=self.run)
        return self.store.record_attempt(self.run, t.key, sample, turn, status=status if source is not None else "parse_failed",
                                         llm_call_id=call_id, verdict_id=verdict_id,
                                         speedup=speedup if status == "correct" else None, meta=meta)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_only_correct_unflagged_coder_turns_are_exported_and_the_dataset_loads_back(tmp_path: Path) -> None:
    with Store(tmp_path / "ws") as store:
        b = RunBuilder(store)
        b.coder("softmax_rows", 0, 0, "class ModelNew: pass  # wrong\n", "incorrect")
        b.coder("softmax_rows", 0, 1, RELU, speedup=1.5)
        b.coder("softmax_rows", 0, 2, SIGMOID, speedup=2.0, flags=("low_coverage",))
        b.coder("softmax_rows", 1, 0, None)  # no candidate in the reply
        store.record_attempt(b.run, b.task("softmax_rows").key, 1, 1, status="llm_error", feedback="HTTP 500")
        b.coder("softmax_rows", 2, 0, ROWSUM, speedup=1.2, by_model=False)  # a template's kernel, no model wrote it
        b.coder("rms_norm", 0, 0, ROWSUM, speedup=1.3)
        last = store.llm_calls(run_id=b.run)[-1]  # its reply file is gone
        assert last.task_key == "examples/rms_norm" and last.reply_path is not None
        (store.workspace / last.reply_path).unlink()

        summary = export_sft(store, tmp_path / "out", SFTExportConfig(roles=["coder"]))

    rows = _rows(tmp_path / "out" / "sft.jsonl")
    assert len(rows) == 1
    (row,) = rows
    assert row["messages"] == [{"role": "system", "content": "you are the coder"},
                               {"role": "user", "content": "write softmax_rows (sample 0, turn 1)"},
                               {"role": "assistant", "content": f"Here is my kernel.\n```python\n{RELU}```"}]
    assert (row["task"], row["role"], row["turn"], row["sample"], row["run"], row["model"]) == \
        ("examples/softmax_rows", "coder", 1, 0, b.run, "fake-model")
    assert row["verdict"] == {"status": "correct", "speedup": 1.5}
    assert summary.dropped == {"failed": 2, "no_reply": 2, "flagged": 1, "no_model_call": 1}
    assert (summary.considered, summary.kept) == (7, 1)
    assert summary.roles["coder"].model_dump() == {"considered": 7, "kept": 1, "dropped": summary.dropped}
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary.model_dump(mode="json")
    assert datasets.load_from_disk(str(tmp_path / "out" / "dataset")).to_list() == rows


def test_near_duplicate_kernels_differing_in_comments_layout_and_names_are_one() -> None:
    assert code_tokens(RELU) == code_tokens(RELU_RENAMED)
    assert near_duplicates([RELU_RENAMED, SIGMOID, RELU, ROWSUM], 0.8) == [None, None, 0, None]
    # a library name is not the candidate's own: relu and sigmoid calls stay different
    assert code_tokens("y = torch.relu(x)") != code_tokens("y = torch.sigmoid(x)")


def test_near_duplicates_keep_the_fastest_and_the_cap_keeps_the_fastest_per_task(tmp_path: Path) -> None:
    with Store(tmp_path / "ws") as store:
        b = RunBuilder(store)
        b.coder("softmax_rows", 0, 0, RELU, speedup=1.2)
        b.coder("softmax_rows", 1, 0, RELU_RENAMED, speedup=1.8)
        b.coder("softmax_rows", 2, 0, SIGMOID, speedup=1.5)
        b.coder("rms_norm", 0, 0, SIGMOID, speedup=1.1)
        b.coder("rms_norm", 0, 1, ROWSUM, speedup=3.0)
        b.coder("rms_norm", 0, 2, "x = 1\n", "build_failed")
        uncapped = export_sft(store, tmp_path / "all", SFTExportConfig())
        capped = export_sft(store, tmp_path / "capped", SFTExportConfig(max_per_task=1))

    kept = {(r["task"], r["sample"], r["turn"]): r["verdict"]["speedup"] for r in _rows(tmp_path / "all" / "sft.jsonl")}
    assert kept == {("examples/softmax_rows", 1, 0): 1.8, ("examples/softmax_rows", 2, 0): 1.5,
                    ("examples/rms_norm", 0, 0): 1.1, ("examples/rms_norm", 0, 1): 3.0}
    assert uncapped.dropped == {"near_duplicate": 1, "failed": 1}
    capped_rows = _rows(tmp_path / "capped" / "sft.jsonl")
    assert {(r["task"], r["verdict"]["speedup"]) for r in capped_rows} == {("examples/softmax_rows", 1.8), ("examples/rms_norm", 3.0)}
    assert capped.dropped == {"near_duplicate": 1, "over_cap": 2, "failed": 1}
    assert {k: (t.before, t.successes, t.after) for k, t in capped.tasks.items()} == \
        {"examples/rms_norm": (3, 2, 1), "examples/softmax_rows": (3, 3, 1)}


def _picks(*names: str) -> str:
    return "```json\n" + json.dumps({"skills": [{"name": n, "reason": "fits"} for n in names]}) + "\n```"


def test_selector_planner_and_summarizer_records_follow_what_they_led_to(tmp_path: Path) -> None:
    with Store(tmp_path / "ws") as store:
        b = RunBuilder(store)
        task = b.task("softmax_rows").key
        # three selections: the first and third picked skills (schemes 1 and 2), the second nothing usable;
        # the first was asked again by a resumed run
        b.call("selector", "softmax_rows", 0, _picks("tiling"))
        b.call("selector", "softmax_rows", 1, _picks("no-such-skill"))
        b.call("selector", "softmax_rows", 2, _picks("fusion", "vectorize"))
        b.call("selector", "softmax_rows", 0, _picks("tiling"))
        store.put_state(b.run, task, "schemes", [{"skills": ["tiling"], "reasons": ["fits"]},
                                                 {"skills": ["fusion", "vectorize"], "reasons": ["fits", "fits"]}])
        b.coder("softmax_rows", 0, 0, RELU, speedup=1.1, meta={"scheme": 0})
        b.coder("softmax_rows", 1, 0, SIGMOID, speedup=1.7, meta={"scheme": 1})
        b.coder("softmax_rows", 2, 0, "x = 2\n", "incorrect", meta={"scheme": 2})
        # a skill's verification regenerates under its own sample numbers: no scheme's trajectory
        b.coder("softmax_rows", VERIFY_BASE, 0, ROWSUM, speedup=2.4, meta={"verify": "without", "scheme": 2})
        # the planner: round 0's ideas led to a success, round 1's to failures only
        b.call("planner", "softmax_rows", 0, '{"ideas": ["tile rows", "fuse max and sum"]}')
        b.call("planner", "softmax_rows", 1, '{"ideas": ["use shared memory"]}')
        b.coder("softmax_rows", 3, 0, ROWSUM, speedup=1.3, meta={"round": 0, "idea": "tile rows"})
        b.coder("softmax_rows", 3, 1, "x = 3\n", "runtime_error", meta={"round": 1, "idea": "use shared memory"})
        # the summarizer: softmax's skill admitted, rms_norm's rejected
        b.call("summarizer", "softmax_rows", 0, '{"skills": [{"name": "row tiling", "content": "tile rows"}]}')
        b.call("summarizer", "rms_norm", 0, '{"skills": [{"name": "fuse", "content": "fuse it"}]}')
        b.call("summarizer", "rms_norm", 1, None)  # failed for good
        store.record_skill_candidate({"name": "row-tiling"}, "admitted", "2.50x vs 1.10x", run_id=b.run, task_key=task,
                                     evidence={"speedup_with": 2.5, "speedup_without": 1.1})
        store.record_skill_candidate({"name": "fuse"}, "rejected", "too slow", run_id=b.run, task_key=b.task("rms_norm").key)

        summary = export_sft(store, tmp_path / "out", SFTExportConfig(roles=["selector", "planner", "summarizer"]))

    rows = _rows(tmp_path / "out" / "sft.jsonl")
    got = {(r["role"], r["task"], r["sample"], r["turn"]): r["verdict"] for r in rows}
    assert got == {("selector", task, 0, 0): {"status": "correct", "speedup": 1.7},
                   ("planner", task, 0, 0): {"status": "correct", "speedup": 1.3},
                   ("summarizer", task, 0, 0): {"status": "admitted", "speedup": 2.5}}
    selector = next(r for r in rows if r["role"] == "selector")
    assert selector["messages"][-1] == {"role": "assistant", "content": _picks("tiling")}
    assert selector["messages"][:-1] == [{"role": "system", "content": "you are the selector"},
                                         {"role": "user", "content": "selector softmax_rows sample 0"}]
    assert {r: c.dropped for r, c in summary.roles.items()} == {
        "selector": {"repeated": 1, "unlinked": 1, "trajectory_failed": 1},
        "planner": {"trajectory_failed": 1},
        "summarizer": {"no_reply": 1, "not_admitted": 1},
    }


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """The `kernelcraft` entry point, in this process: what a user's command line gets, exit code included."""
    from kernelcraft.cli import main

    monkeypatch.setattr(sys, "argv", ["kernelcraft", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    return int(exit_.value.code or 0)


def test_export_sft_command_prints_and_writes_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with Store(tmp_path / "ws") as store:
        b = RunBuilder(store)
        b.coder("softmax_rows", 0, 0, RELU, speedup=1.4)
        b.coder("softmax_rows", 0, 1, SIGMOID, speedup=2.0, flags=("noisy_timing",))
        run = b.run
    assert _main(monkeypatch, "train", "export-sft", "--out", str(tmp_path / "out"), "--workspace", str(tmp_path / "ws"),
                 "--run", run, "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["kept"], summary["dropped"], summary["runs"]) == (1, {"flagged": 1}, [run])
    assert summary == json.loads((tmp_path / "out" / "summary.json").read_text())

    # again into the same directory: the files are replaced
    assert _main(monkeypatch, "train", "export-sft", "--out", str(tmp_path / "out"), "-w", str(tmp_path / "ws"),
                 "--roles", "coder", "--similarity", "0.9") == 0
    printed = capsys.readouterr().out
    assert "1 of 2 records kept" in printed and "examples/softmax_rows" in printed and "flagged" in printed
    assert datasets.load_from_disk(str(tmp_path / "out" / "dataset")).to_list() == _rows(tmp_path / "out" / "sft.jsonl")


@pytest.mark.parametrize("args, words", [
    (["-w", "{tmp}/nowhere"], "no kernelcraft workspace"),
    (["--run", "no-such-run"], "no run 'no-such-run'"),
    (["--roles", "coder,critic"], "--roles"),
    (["--similarity", "1.5"], "--similarity"),
    (["--roles", "planner"], "nothing to export"),
])
def test_export_sft_bad_input_is_one_line_and_a_nonzero_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], args: list[str],
                                                             words: str) -> None:
    with Store(tmp_path / "ws") as store:
        RunBuilder(store).coder("softmax_rows", 0, 0, RELU, "incorrect")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    code = _main(monkeypatch, "train", "export-sft", "--out", str(tmp_path / "out"), "-w", str(tmp_path / "ws"), *args)
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and words in lines[0], captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "out" / "sft.jsonl").exists()


def test_nothing_to_export_names_why(tmp_path: Path) -> None:
    with Store(tmp_path / "ws") as store:
        b = RunBuilder(store)
        b.coder("softmax_rows", 0, 0, RELU, "incorrect")
        b.coder("softmax_rows", 0, 1, SIGMOID, speedup=1.5, flags=("low_coverage",))
        with pytest.raises(SFTExportError, match="1 failed, 1 flagged"):
            export_sft(store, tmp_path / "out", SFTExportConfig())
