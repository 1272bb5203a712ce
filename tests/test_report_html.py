"""The HTML run report: numbers gathered from a synthetic run in a real store, and the page rendered from them."""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from pathlib import Path

import pytest

from kernelcraft.judge import Flag, Status, TimingStats, Verdict
from kernelcraft.llm import CallRecord, ChatReply, ChatRequest, LLMConfig, Message, Usage
from kernelcraft.report import load_run, render_report, write_report
from kernelcraft.report.run_data import AttemptReport
from kernelcraft.search import OptimizeConfig, SearchConfig, best_attempt
from kernelcraft.store import Store
from kernelcraft.tasks import resolve_task

SOFTMAX, RMS, LEAKY, GELU = "examples/softmax_rows", "examples/rms_norm", "examples/leaky_relu_clamp", "examples/scale_bias_gelu"
DISK_FULL = "no space left on device"
BEST_SOURCE = "class ModelNew:  # softmax v3\n    def forward(self, x):\n        return k(x) if a < b && c > d else x\n"
STARTED, WALL_S = 1_700_000_000.0, 3725.0  # 1h 02m 05s
PRICE_IN, PRICE_OUT = 1e-6, 3e-6  # dollars per token

# (task, turn, status, effective speedup, prompt tokens, completion tokens)
TRAJECTORY = [
    (SOFTMAX, 0, "parse_failed", None, 1000, 200),
    (SOFTMAX, 1, "incorrect", None, 1100, 300),
    (SOFTMAX, 2, "correct", 1.4, 1200, 400),
    (SOFTMAX, 3, "correct", 2.1, 1300, 500),
    (RMS, 0, "build_failed", None, 900, 100),
    (RMS, 1, "incorrect", None, 950, 150),
    (LEAKY, 0, "correct", 0.9, 800, 120),
]


def _verdict(task_key: str, source: str, status: str, speedup: float | None, device_name: str = "cpu0") -> Verdict:
    digest = hashlib.sha256(source.encode()).hexdigest()
    env = {"device_name": device_name, "torch": "2.13"}
    if speedup is None:
        message = DISK_FULL if status == "judge_error" else f"{status}: max abs error 0.5 at [3, 7]"
        return Verdict(status=Status(status), task=task_key, device="cpu", message=message, candidate_hash=digest, env=env)
    reference = TimingStats.of([2.0, 2.1, 2.2])
    return Verdict(status=Status.CORRECT, task=task_key, device="cpu", message="correct", speedup=speedup,
                   speedup_band=(speedup * 0.97, speedup * 1.03), significant=True, reference=reference,
                   candidate=TimingStats.of([x / speedup for x in (2.0, 2.1, 2.2)]), coverage=0.95,
                   flags=[Flag("low_coverage", "some time is spent in PyTorch ops")] if speedup > 2 else [],
                   candidate_hash=digest, env=env)


def _call(store: Store, run_id: str, task_key: str, turn: int, tokens: tuple[int, int], priced: bool) -> int:
    request = ChatRequest(model="fake-coder", messages=(Message("user", f"{task_key} turn {turn}"),), purpose="coder",
                          task=task_key)
    cost = tokens[0] * PRICE_IN + tokens[1] * PRICE_OUT if priced else None
    reply = ChatReply(text="```python\nclass ModelNew: ...\n```", usage=Usage(*tokens), model="fake-coder",
                      finish_reason="stop", latency_s=2.0, cost_usd=cost)
    return store.record_llm_call(CallRecord(request=request, reply=reply, started_at=STARTED), run_id)


def build_run(store: Store, trajectory: list[tuple] = TRAJECTORY, *, priced: bool = True, finished: bool = True,
              judge_failed: dict[str, int] | None = None, devices: dict[str, str] | None = None) -> str:
    """A synthetic optimization run with one model call and one attempt per row of `trajectory`, and per task of
    `judge_failed` that many evaluations the judge failed on its own side (verdicts of the run, no attempt: the
    search parks such a step); `devices`: a task's verdicts' device name other than cpu0."""
    judge_failed = judge_failed or {}
    keys = list(dict.fromkeys([*(row[0] for row in trajectory), *judge_failed]))
    tasks = {key: resolve_task(key) for key in keys}
    config = OptimizeConfig(target="examples", device="cpu", llm=LLMConfig(model="fake-coder"),
                            search=SearchConfig(turns=4, samples=1))
    run_id = store.start_run("optimize", config.model_dump(mode="json"))
    store.add_run_tasks(run_id, list(tasks.values()))
    for key, turn, status, speedup, *tokens in trajectory:
        call_id = _call(store, run_id, key, turn, tuple(tokens), priced)
        verdict_id = None
        if status != "parse_failed":
            source = BEST_SOURCE if speedup == 2.1 else f"class ModelNew:  # {key} turn {turn}\n"
            verdict = _verdict(key, source, status, speedup, (devices or {}).get(key, "cpu0"))
            verdict_id = store.record_verdict(tasks[key], source, verdict, run_id=run_id)
        store.record_attempt(run_id, key, 0, turn, status=status, llm_call_id=call_id, verdict_id=verdict_id,
                             speedup=speedup, feedback=f"turn {turn}: {status} <script>alert(1)</script>")
    for key, n in judge_failed.items():
        for i in range(n):
            source = f"class ModelNew:  # {key} lost {i}\n"
            store.record_verdict(tasks[key], source, _verdict(key, source, "judge_error", None), run_id=run_id)
    for key in keys:
        store.finish_run_task(run_id, key)
    if finished:
        store.finish_run(run_id)
        # fixed clocks, so the wall time is known exactly
        store._exec("UPDATE runs SET started_at=?, finished_at=? WHERE id=?", (STARTED, STARTED + WALL_S, run_id))
    return run_id


def test_load_run_gathers_best_candidates_metrics_and_usage(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        report = load_run(store, build_run(store))
    softmax, rms, leaky = report.tasks
    assert [t.key for t in report.tasks] == [SOFTMAX, RMS, LEAKY]
    assert (softmax.best.turn, softmax.best.speedup, softmax.best_source) == (3, 2.1, BEST_SOURCE)
    assert softmax.best.verdict.speedup_band == pytest.approx((2.1 * 0.97, 2.1 * 1.03))
    assert [a.status for a in softmax.attempts] == ["parse_failed", "incorrect", "correct", "correct"]
    assert softmax.attempts[0].verdict is None and softmax.correct_attempts == 2
    assert rms.best is None and rms.best_source is None and len(rms.attempts) == 2
    assert leaky.best.speedup == 0.9

    s = report.summary
    assert (s.total, s.correct) == (3, 2)
    assert s.fast_p == pytest.approx({0.0: 2 / 3, 0.5: 2 / 3, 0.8: 2 / 3, 1.0: 1 / 3, 1.5: 1 / 3, 2.0: 1 / 3})
    assert s.geomean == pytest.approx(math.sqrt(2.1 * 0.9))
    assert s.median == pytest.approx(1.5) and s.win_rate == pytest.approx(0.5)

    assert [(p.turn, p.solved) for p in report.turns] == [(0, 1), (1, 1), (2, 2), (3, 2)]
    assert [p.geomean for p in report.turns] == pytest.approx([0.9, 0.9, math.sqrt(1.4 * 0.9), math.sqrt(2.1 * 0.9)])

    assert (report.usage.calls, report.usage.prompt_tokens, report.usage.completion_tokens) == (7, 7250, 1770)
    assert report.usage.cost_usd == pytest.approx(7250 * PRICE_IN + 1770 * PRICE_OUT)
    assert report.usage.latency_s == pytest.approx(14.0)
    assert (softmax.usage.calls, softmax.usage.prompt_tokens, softmax.usage.completion_tokens) == (4, 4600, 1400)
    assert report.wall_s == pytest.approx(WALL_S) and report.finished
    assert (report.model, report.strategy, report.device) == ("fake-coder", "refine", "cpu")


def test_an_unfinished_run_lasts_until_its_last_attempt(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        run_id = build_run(store, TRAJECTORY[:3], finished=False)
        report = load_run(store, run_id)
        last = max(a.created_at for a in store.attempts(run_id))
    assert not report.finished and report.wall_s == pytest.approx(last - report.run.started_at)
    assert "interrupted" in render_report(report)


def test_the_best_attempt_is_the_fastest_and_the_earliest_of_equals() -> None:
    def attempt(turn: int, sample: int, status: str, speedup: float | None) -> AttemptReport:
        return AttemptReport(sample=sample, turn=turn, status=status, speedup=speedup, feedback="", verdict_id=None,
                             verdict=None, llm_call_id=None, created_at=0.0)

    tie_late, tie_early = attempt(2, 0, "correct", 1.5), attempt(1, 1, "correct", 1.5)
    assert best_attempt([tie_late, attempt(0, 0, "correct", 1.2), tie_early]) is tie_early
    assert best_attempt([attempt(0, 0, "incorrect", None), attempt(1, 0, "parse_failed", None)]) is None


def test_the_page_shows_sources_verdicts_trajectories_and_three_plots(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        run_id = build_run(store)
        path = write_report(store, run_id)
    html = path.read_text()
    assert path == tmp_path / "runs" / run_id / "report.html"
    assert html.count("<svg") == 3 and html.count("</svg>") == 3
    assert "if a &lt; b &amp;&amp; c &gt; d else x" in html  # the best source, escaped
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    rms_section = html.split('id="task-examples-rms_norm"')[1].split("</article>")[0]
    assert "no correct candidate" in rms_section.lower() and "build_failed" in rms_section
    for text in ("fake-coder", "refine", "1h 02m 05s", "finished", "2.10x", "0.90x", "1.37x", "67%", "33%", "50%",
                 "7,250", "1,770", "$0.01256", "low_coverage", "[2.04x \u2013 2.16x]", "2.100 ms / 1.000 ms", "95%"):
        assert text in html, text
    # the plots' ids are prefixed per figure, so three inline SVGs never share one
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_the_page_gives_every_attempt_its_source_and_reply_duplicates_the_environment_and_the_commands(
        tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        run_id = build_run(store, [("examples/row_mean_square", 0, "incorrect", None, 10, 10),
                                   ("examples/row_mean_square", 1, "incorrect", None, 10, 10)], finished=False)
        rows = store.attempts(run_id)
        # turn 1's source equals turn 0's: it reuses turn 0's verdict, as the search's VerdictReuse does
        store._exec("UPDATE attempts SET verdict_id=? WHERE id=?", (rows[0].verdict_id, rows[1].id))
        store._exec("UPDATE verdicts SET verdict_json=json_set(verdict_json, '$.env.compilers', json('{\"c++\": \"g++ 12\"}'))")
        run = load_run(store, run_id)
        html = write_report(store, run_id).read_text()
    first, second = run.tasks[0].attempts
    assert first.source == "class ModelNew:  # examples/row_mean_square turn 0\n" and first.reply.startswith("```python")
    assert first.duplicate_of is None and second.duplicate_of == (0, 0)
    assert "the same kernel as sample 1, turn 1" in html and html.count("the model's reply") == 2  # counted from 1
    assert run.environment == {"device": "cpu0", "torch": "2.13", "compiler c++": "g++ 12"}
    assert f"kernelcraft optimize --resume {run_id} -w {tmp_path.resolve()}" in html
    assert run.settings_changed == ('target = "examples"\ndevice = "cpu"\nllm.model = "fake-coder"\nsearch.turns = 4\n'
                                    'search.samples = 1\nsearch.language = "cpp"\n')
    assert OptimizeConfig.model_validate(tomllib.loads(run.settings_file)) == run.config  # the run file runs it again


def test_a_run_over_two_devices_summarizes_the_other_apart(tmp_path: Path) -> None:
    with Store(tmp_path / "ws") as store:
        report = load_run(store, build_run(store, devices={LEAKY: "cpu1"}))
        html = render_report(report)
    assert (report.summary.device_name, report.summary.correct) == ("cpu0", 1)
    assert [(o.device_name, o.correct, o.geomean) for o in report.other_devices] == [("cpu1", 1, 0.9)]
    assert "cpu1, 1 of 1 correct" in html and 'id="other-devices"' in html


def test_the_page_fetches_nothing(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        html = render_report(load_run(store, build_run(store)))
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(?!#|data:)[^"'\s>]""", html), "a resource outside the page"
    assert not re.search(r"@import|url\((?!#)", html)
    assert "<script" not in html


def test_a_model_that_never_writes_a_correct_kernel_gets_a_report_that_says_so(tmp_path: Path) -> None:
    failing = [(RMS, 0, "build_failed", None, 900, 100), (RMS, 1, "incorrect", None, 950, 150),
               (LEAKY, 0, "parse_failed", None, 800, 50)]
    with Store(tmp_path) as store:
        report = load_run(store, build_run(store, failing, priced=False))
    assert all(t.best is None for t in report.tasks)
    assert report.summary.correct == 0 and report.summary.geomean is None and set(report.summary.fast_p.values()) == {0.0}
    assert [p.solved for p in report.turns] == [0, 0] and report.usage.cost_usd is None
    html = render_report(report)
    assert html.count("<svg") == 3
    assert html.lower().count("no correct candidate") >= 2 * len(report.tasks)
    # matplotlib keeps each text as a comment beside its glyph paths: the figures say why they are empty
    assert "<!-- no correct candidate: no speedups to show -->" in html
    assert "<!-- no correct candidate at any turn -->" in html
    assert ">unknown<" in html  # the cost, with no prices


def test_the_report_gives_fast_p_against_each_baseline_and_leaves_judge_errors_out(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        for key, recorded in ((SOFTMAX, {"eager": 2.0, "eager_default": 1.5, "compile_default": 1.0, "compile": 0.4}),
                              (LEAKY, {"eager": 2.0, "eager_default": 2.0})):
            for kind, ms in recorded.items():
                store.record_baseline(key, "cpu", "cpu0", kind, TimingStats.of([ms]), "2.13")
        report = load_run(store, build_run(store, judge_failed={SOFTMAX: 1, GELU: 2}))
    softmax, rms, leaky, gelu = report.tasks
    assert softmax.not_judged is None and gelu.not_judged == DISK_FULL  # a candidate judged makes softmax count
    assert report.evaluations_not_judged == {DISK_FULL: 3}
    s = report.summary
    assert (s.total, s.judged, s.correct, s.not_judged) == (4, 3, 2, {DISK_FULL: 1})
    assert s.fast_p[1.0] == pytest.approx(1 / 3)  # of softmax, rms and leaky: gelu was never judged
    assert [b.label for b in s.baselines] == ["eager (strict)", "eager (PyTorch defaults)", "torch.compile (PyTorch defaults)",
                                              "torch.compile (strict, legacy)"]
    default, compiled = s.vs("eager_default"), s.vs("compile_default")
    assert default.fast_p[1.0] == pytest.approx(1 / 3) and default.geomean == pytest.approx(math.sqrt(2.1 * 0.75 * 0.9))
    # leaky has no torch.compile baseline: out of that row, whose fast_1 is softmax's 1.05x of softmax and rms
    assert (compiled.tasks, compiled.correct, compiled.missing) == (2, 1, 1) and compiled.fast_p[1.0] == 0.5
    html = render_report(report)
    for text in ("fast_1 vs eager (strict)", "fast_1 vs torch.compile (PyTorch defaults)", "1.05x",
                 "torch.compile (strict, legacy)", f"not judged: 1 ({DISK_FULL})", f"evaluations not judged: 3 ({DISK_FULL})",
                 'class="pill judge_error"'):
        assert text in html, text
    gelu_section = html.split(f'id="{gelu.anchor}"')[1].split("</article>")[0]
    assert "Not judged" in gelu_section and "no correct candidate" not in gelu_section.lower()


def test_a_run_with_no_tasks_yet_renders_and_an_unknown_run_is_a_key_error(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        report = load_run(store, store.start_run("optimize", {}))
        with pytest.raises(KeyError):
            load_run(store, "nope")
    assert report.tasks == [] and report.turns == [] and report.wall_s is None and report.model == "unknown"
    html = render_report(report)
    assert html.count("<svg") == 3 and "<!-- no tasks in this run -->" in html and "<!-- no attempts recorded -->" in html


def test_the_page_of_a_long_run_stays_small_listing_the_ends_of_each_trajectory_and_linking_long_replies(
        tmp_path: Path) -> None:
    """2,000 attempts (4 tasks x 10 samples x 50 turns) with 30 KB replies and sources: 60 MB of replies the page must
    not inline."""
    tasks = {key: resolve_task(key) for key in (SOFTMAX, RMS, LEAKY, GELU)}
    config = OptimizeConfig(target="examples", device="cpu", llm=LLMConfig(model="fake-coder"),
                            search=SearchConfig(turns=50, samples=10))
    padding = "    # " + "x" * 74 + "\n"
    with Store(tmp_path / "ws") as store:
        run_id = store.start_run("optimize", config.model_dump(mode="json"))
        store.add_run_tasks(run_id, list(tasks.values()))
        for key, task in tasks.items():
            for sample in range(10):
                for turn in range(50):
                    source = f"class ModelNew:  # {key} {sample} {turn}\n" + padding * 380  # 30 KB
                    request = ChatRequest(model="fake-coder", messages=(Message("user", f"{key} {sample} {turn}"),), task=key)
                    reply = ChatReply(text=f"```python\n{source}```\n", usage=Usage(10, 7500), model="fake-coder",
                                      finish_reason="stop", latency_s=1.0, cost_usd=None)
                    call_id = store.record_llm_call(CallRecord(request=request, reply=reply, started_at=STARTED), run_id)
                    speedup = 1.0 + (sample == 5) + turn / 1000 if turn % 7 == 3 else None  # the best mid-trajectory
                    status = "correct" if speedup else "incorrect"
                    vid = store.record_verdict(task, source, _verdict(key, source, status, speedup), run_id=run_id)
                    store.record_attempt(run_id, key, sample, turn, status=status, llm_call_id=call_id, verdict_id=vid,
                                         speedup=speedup, feedback=f"turn {turn}: {status}\n" + "the judge says more\n" * 100)
        path = write_report(store, run_id)
        run = load_run(store, run_id)
    html = path.read_text()
    assert len(html.encode()) < 5_000_000, len(html.encode())
    for t in run.tasks:
        section = html.split(f'id="{t.anchor}"')[1].split("</article>")[0]
        listed_rows = section.count('<td class="num">') // 3  # a listed attempt's sample, turn and speedup cells
        assert listed_rows == 61 and section.count('class="gap"') == 2, listed_rows  # the ends, and the best between
        assert "439 more attempts not listed" not in section and "more attempts not listed (" in section
        assert (t.best.sample, t.best.turn) == (5, 45) and "Best kernel: sample 6, turn 46" in section
        assert 'class="best"' in section
    links = re.findall(r'<a href="([^"#]+)">the model\'s reply</a>', html)
    assert len(links) == 4 * 61 and all(link.startswith("llm/") and (path.parent / link).is_file() for link in links)
    assert "longer than the 8,000 characters shown here" in html
