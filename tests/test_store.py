from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelcraft.judge import Flag, Status, TimingStats, Verdict
from kernelcraft.store import Store
from kernelcraft.tasks import resolve_task


def _verdict(task_key: str, speedup: float) -> Verdict:
    return Verdict(status=Status.CORRECT, task=task_key, device="cpu", message="ok", speedup=speedup, significant=True,
                   reference=TimingStats.of([2.0, 2.1]), candidate=TimingStats.of([1.0, 1.1]), candidate_hash="h",
                   flags=[Flag("noisy_timing", "x")], env={"device_name": "cpu0", "torch": "2.13"})


def test_verdicts_round_trip_with_every_field(tmp_path: Path) -> None:
    task = resolve_task("softmax_rows")
    with Store(tmp_path) as store:
        assert store.schema_version >= 1
        vid = store.record_verdict(task, "source", _verdict(task.key, 2.0), origin="file.py")
        v = store.verdict(vid)
        (row,) = store.verdicts(task_key=task.key)
    assert v.status is Status.CORRECT and v.speedup == 2.0 and v.flags[0].code == "noisy_timing"
    assert v.reference.median_ms == TimingStats.of([2.0, 2.1]).median_ms
    assert row.device_name == "cpu0" and row.flags == "noisy_timing"
    assert (tmp_path / "kernelcraft.db-wal").exists() or (tmp_path / "kernelcraft.db").exists()


def test_reopening_does_not_rerun_migrations(tmp_path: Path) -> None:
    task = resolve_task("softmax_rows")
    with Store(tmp_path) as s:
        s.record_verdict(task, "src", _verdict(task.key, 1.5))
    with Store(tmp_path) as s:
        assert len(s.verdicts()) == 1


def _open_at_the_barrier(workspace: Path, barrier, results) -> None:
    barrier.wait()
    try:
        with Store(workspace) as s:
            results.put(s.schema_version)
    except Exception as e:  # the parent reports what went wrong in which process
        results.put(repr(e))


def test_processes_opening_a_new_workspace_at_once_migrate_it_once(tmp_path: Path) -> None:
    import multiprocessing

    from kernelcraft.store.schema import MIGRATIONS

    ctx = multiprocessing.get_context("fork")
    for trial in range(20):  # the races were there in about one trial in ten
        barrier, results = ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_open_at_the_barrier, args=(tmp_path / str(trial), barrier, results)) for _ in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        assert [results.get(timeout=10) for _ in procs] == [len(MIGRATIONS)] * 8


def test_nothing_recorded_is_lost_when_the_process_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store import _verdict
        from kernelcraft.store import Store
        from kernelcraft.tasks import resolve_task
        task = resolve_task("softmax_rows")
        store = Store(__import__("pathlib").Path({str(tmp_path)!r}))
        run = store.start_run("test", {{}})
        for i in range(10000):
            store.record_verdict(task, f"src{{i}}", _verdict(task.key, 1.0 + i), run_id=run)
            print(i, flush=True)
            time.sleep(0.01)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    seen = -1
    for line in proc.stdout:
        seen = int(line)
        if seen >= 20:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store(tmp_path) as store:
        rows = store.verdicts()
        assert len(rows) >= seen + 1
        assert store._query("PRAGMA integrity_check")[0][0] == "ok"


def test_llm_calls_are_recorded_with_prompt_and_reply_files(tmp_path: Path) -> None:
    from kernelcraft.llm import LLMConfig, LLMError, Message, Price, make_client

    from .fake_openai import FakeOpenAI, Step

    with Store(tmp_path / "ws") as store, FakeOpenAI() as srv:
        run = store.start_run("optimize", {})
        srv.script = [Step(text="```python\nclass ModelNew: ...\n```"), Step(status=400)]
        client = make_client(LLMConfig(model="fake-coder", base_url=srv.url, prices={"*": Price(input=1, output=3)}),
                             on_call=lambda rec: store.record_llm_call(rec, run))
        client.chat(client.request([Message("system", "rules"), Message("user", "task")], purpose="coder", task="t/1"))
        with pytest.raises(LLMError, match="refused the request \\(400\\)"):
            client.chat(client.request([Message("user", "again")], purpose="coder", task="t/1"))
        ok, failed = store.llm_calls(run_id=run)
    assert (ok.purpose, ok.task_key, ok.model, ok.prompt_tokens, ok.completion_tokens) == ("coder", "t/1", "fake-coder", 2, 5)
    assert ok.cost_usd == pytest.approx((2 * 1 + 5 * 3) / 1e6) and ok.error is None
    assert json.loads((tmp_path / "ws" / ok.prompt_path).read_text())["messages"][0] == {"role": "system", "content": "rules"}
    assert (tmp_path / "ws" / ok.reply_path).read_text().startswith("```python")
    assert failed.reply_path is None and "400" in failed.error


def test_a_runs_tasks_and_attempts_come_back_in_order(tmp_path: Path) -> None:
    tasks = [resolve_task("softmax_rows"), resolve_task("rms_norm")]
    with Store(tmp_path) as store:
        run_id = store.start_run("optimize", {"model": "m"})
        store.add_run_tasks(run_id, tasks)
        store.add_run_tasks(run_id, tasks)  # a resume adds them again: nothing changes
        vid = store.record_verdict(tasks[0], "src", _verdict(tasks[0].key, 2.0), run_id=run_id)
        store.record_attempt(run_id, tasks[0].key, 0, 1, status="correct", verdict_id=vid, speedup=2.0, feedback="fb1")
        store.record_attempt(run_id, tasks[0].key, 0, 0, status="parse_failed", feedback="fb0")
        store.finish_run_task(run_id, tasks[0].key)
        rows = store.run_tasks(run_id)
        attempts = store.attempts(run_id, tasks[0].key)
        assert store.candidate_source(vid) == "src"
        assert store.run(run_id).args == {"model": "m"} and [r.id for r in store.runs("optimize")] == [run_id]
        with pytest.raises(KeyError):
            store.run("nope")
    assert [r.task_key for r in rows] == [t.key for t in tasks]
    assert rows[0].finished_at is not None and rows[1].finished_at is None
    assert [(a.turn, a.status, a.feedback) for a in attempts] == [(0, "parse_failed", "fb0"), (1, "correct", "fb1")]


def test_a_recorded_run_replays_its_answers_under_any_model_name(tmp_path: Path) -> None:
    from kernelcraft.llm import LLMConfig, LLMError, Message, make_client

    from .fake_openai import FakeOpenAI

    asked = [[Message("system", "rules"), Message("user", f"task {i}")] for i in range(3)]
    with Store(tmp_path / "ws") as store, FakeOpenAI(responder=lambda m: f"answer to {m[-1]['content']}") as srv:
        run = store.start_run("optimize", {})
        client = make_client(LLMConfig(model="fake-coder", base_url=srv.url), on_call=lambda rec: store.record_llm_call(rec, run))
        first = [client.chat(client.request(m, sample=1)).text for m in asked]
    replay = make_client(LLMConfig.from_spec(f"replay:{tmp_path / 'ws' / 'runs' / run}"))
    replay.check()
    again = [replay.chat(replay.request(m, sample=1)) for m in reversed(asked)]
    assert [r.text for r in reversed(again)] == first == ["answer to task 0", "answer to task 1", "answer to task 2"]
    assert again[0].usage.completion_tokens == 4
    with pytest.raises(LLMError, match="no answer left"):
        replay.chat(replay.request(asked[0], sample=2))  # another sample was never recorded


def test_correct_kernels_put_the_faster_measured_first_among_those_within_noise(tmp_path: Path) -> None:
    task = resolve_task("softmax_rows")
    noise = [dataclasses.replace(_verdict(task.key, s), significant=False) for s in (1.02, 1.08, 0.97)]
    with Store(tmp_path) as store:
        for i, v in enumerate([_verdict(task.key, 0.9), *noise, _verdict(task.key, 1.5)]):
            store.record_verdict(task, f"src{i}", dataclasses.replace(v, candidate_hash=f"h{i}"), context_hash="ctx")
        ranked = [(source, speedup) for _, source, speedup in store.correct_kernels("ctx")]
    # 1.5 is a win; the three within noise count 1.0 each, the 1.08 one first; a significant 0.9 last
    assert ranked == [("src4", 1.5), ("src2", 1.0), ("src1", 1.0), ("src3", 1.0), ("src0", 0.9)]


def test_a_verdict_records_the_device_index_and_node_it_was_measured_on(tmp_path: Path) -> None:
    task = resolve_task("softmax_rows")
    on_a_node = dataclasses.replace(_verdict(task.key, 2.0), env={"device_name": "cpu0", "device_index": 1, "node": "10.0.0.7"})
    with Store(tmp_path) as store:
        placed = store.record_verdict(task, "src0", on_a_node)
        older = store.record_verdict(task, "src1", dataclasses.replace(_verdict(task.key, 1.5), candidate_hash="h1"))
        rows = {r["id"]: (r["device_index"], r["node"]) for r in store._query("SELECT id, device_index, node FROM verdicts")}
    assert rows == {placed: (1, "10.0.0.7"), older: (None, "")}  # a verdict without them (an older judge's)


def test_a_workspace_where_nothing_can_be_written_is_named_read_only() -> None:
    from kernelcraft.store import StoreError

    target = Path("/sys/kernelcraft-workspace")  # sysfs refuses new directories to every user, root included
    try:
        target.mkdir()
    except OSError:
        pass
    else:
        target.rmdir()
        pytest.skip("/sys takes new directories here")
    with pytest.raises(StoreError, match="read-only, kernelcraft cannot write there .*: give -w a directory you can write"):
        Store(target)


def test_verdicts_are_listed_by_run_task_name_and_status_with_the_candidates_origin(tmp_path: Path) -> None:
    softmax, leaky = resolve_task("softmax_rows"), resolve_task("leaky_relu_clamp")
    failed = dataclasses.replace(_verdict(leaky.key, 0.0), status=Status.INCORRECT, candidate_hash="h2")
    with Store(tmp_path) as store:
        run = store.start_run("eval-suite", {})
        first = store.record_verdict(softmax, "s0", _verdict(softmax.key, 2.0), origin="mine.py")
        store.record_verdict(leaky, "s1", dataclasses.replace(_verdict(leaky.key, 1.5), candidate_hash="h1"), run_id=run)
        last = store.record_verdict(leaky, "s2", failed, run_id=run, origin="solutions/2.py")
        assert [r.id for r in store.verdicts(task_key="leaky_relu_clamp")] == [first + 1, last]  # by name, or by key
        assert [r.id for r in store.verdicts(task_key="examples/leaky_relu_clamp", status="incorrect")] == [last]
        assert [r.id for r in store.verdicts(task_key="relu_clamp")] == []  # a name is whole
        assert [r.id for r in store.verdicts(run_id=run, last=1)] == [last]
        assert [r.id for r in store.verdicts(last=2)] == [first + 1, last]  # the latest, oldest first
        row = store.verdict_row(first)
        assert (row.run_id, row.origin, row.status) == (None, "mine.py", "correct")
        with pytest.raises(KeyError):
            store.verdict_row(last + 1)


def test_a_read_only_store_must_exist_and_is_read(tmp_path: Path) -> None:
    from kernelcraft.store import StoreError

    with pytest.raises(StoreError, match="no kernelcraft.db here"):
        Store(tmp_path / "none", read_only=True)
    assert not (tmp_path / "none").exists()  # nothing made
    with Store(tmp_path / "ws") as store:
        store.start_run("optimize", {})
    with Store(tmp_path / "ws", read_only=True) as store:  # on a read-only disk: test_cli.py
        assert len(store.runs()) == 1
