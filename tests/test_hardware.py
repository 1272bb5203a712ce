"""Feedback from the hardware: the roofline from the judge's own numbers, ncu's CSV as kernel records, the
profiler's fallback, `kernelcraft profile`, and the profile in the feedback and the report. No GPU: ncu is a
hand-written CSV or a stand-in script."""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest

from kernelcraft.agents import Coder
from kernelcraft.judge import (Job, KernelProfile, KernelProfiler, KernelRecord, Result, Roofline, Status, TimingStats, Verdict,
                               self_check_source)
from kernelcraft.judge.kernel_profile import NCU, OWN_CODE, TORCH_PROFILER
from kernelcraft.judge.isolation import isolation
from kernelcraft.judge.nsight import counters_capability, find_ncu, kernel_records, ncu_command, parse_ncu_csv, refusal
from kernelcraft.judge.worker.landlock import abi_version
from kernelcraft.llm import LLMClient, LLMConfig
from kernelcraft.report import load_run, render_report
from kernelcraft.search import OptimizeConfig, Optimizer, SearchConfig
from kernelcraft.store import Store
from kernelcraft.tasks import load_task_file, resolve_task

from .conftest import CANDIDATES
from .redteam.cases import CANDIDATES_DIR, TASKS_DIR
from .test_cli import FAST_TOML, kc
from .test_parked import DEVICE, Scripted, StubJudge, tiny_tasks

H100 = {"bandwidth_bytes_per_s": 3.0e12, "max_flops": 600e12}
GEMM = "void gemm_tile_kernel<128, 64>(float const*, float const*, float*, int, int, int)"
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
        "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",'
          '"Section Name","Metric Name","Metric Unit","Metric Value"')
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def _rows(launch: int, kernel: str, metrics: list[tuple[str, str, str]]) -> list[str]:
    grid = '"(256, 1, 1)","(1024, 1, 1)","0","9.0"'
    return [f'"{launch}","4242","python3","127.0.0.1","{kernel}","1","7",{grid},"Command line profiler metrics","{name}",'
            f'"{unit}","{value}"' for name, unit, value in metrics]


def _launch(duration: tuple[str, str], dram: str, sm: str, occupancy: str, registers: str, dynamic: tuple[str, str],
            stalls: dict[str, str]) -> list[tuple[str, str, str]]:
    return [("gpu__time_duration.sum", duration[1], duration[0]),
            ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", dram),
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", sm),
            ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", occupancy),
            ("launch__registers_per_thread", "register/thread", registers),
            ("launch__shared_mem_per_block_static", "byte", "0"),
            ("launch__shared_mem_per_block_dynamic", dynamic[1], dynamic[0]),
            *((STALL.format(reason), "", value) for reason, value in stalls.items())]


# ncu's details page as `ncu --csv --log-file` writes it: its progress lines first, one row per launch and metric,
# values with thousands separators, units it picks per value, "n/a" where a metric has no value. The GEMM kernel
# runs twice, the fill once between.
NCU_CSV = "\n".join([
    '==PROF== Connected to process 4242 (/usr/bin/python3.12)',
    '==PROF== Profiling "gemm_tile_kernel" - 0: 0%....50%....100% - 9 passes',
    '==PROF== Profiling "vectorized_elementwise_kernel" - 1: 0%....50%....100% - 9 passes',
    HEADER,
    *_rows(0, GEMM, _launch(("1,205.50", "usecond"), "82.50", "31.20", "61.00", "32", ("4.10", "Kbyte"),
                            {"long_scoreboard": "14.20", "barrier": "0.50", "selected": "1.00", "not_selected": "3.00",
                             "mio_throttle": "n/a"})),
    *_rows(1, FILL, _launch(("5,120", "nsecond"), "20.00", "10.00", "30.00", "16", ("0", "byte"),
                            {"long_scoreboard": "2.00", "wait": "4.50"})),
    *_rows(2, GEMM, _launch(("794.50", "usecond"), "78.00", "29.00", "59.00", "32", ("4.10", "Kbyte"),
                            {"long_scoreboard": "12.00", "barrier": "0.70"})),
    '==PROF== Disconnected from process 4242',
]) + "\n"


def test_the_roofline_gives_rates_shares_floors_and_the_bound() -> None:
    gemm = Roofline.of(2 * 4096**3, 3 * 4096 * 4096 * 2, 0.5, H100)  # fp16 GEMM: compute-bound
    assert gemm.tflops == pytest.approx(2 * 4096**3 / 0.5e-3 / 1e12) and gemm.peak_tflops == 600
    assert gemm.gbps == pytest.approx(3 * 4096 * 4096 * 2 / 0.5e-3 / 1e9) and gemm.peak_gbps == 3000
    assert gemm.compute_share == pytest.approx(gemm.tflops / 600) and gemm.memory_share == pytest.approx(gemm.gbps / 3000)
    assert gemm.flop_floor_ms == pytest.approx(2 * 4096**3 / 600e12 * 1e3)
    assert (gemm.bound, gemm.share) == ("compute", gemm.compute_share)
    relu = Roofline.of(0, 2 * 4 * 2**24, 0.1, H100)  # elementwise: FlopCounterMode counts no FLOPs
    assert (relu.bound, relu.tflops, relu.compute_share) == ("memory", 0.0, 0.0)
    assert relu.share == relu.memory_share == pytest.approx(relu.bytes_floor_ms / 0.1)


def test_a_verdict_keeps_its_roofline_through_json() -> None:
    v = Verdict(status=Status.CORRECT, task="t", device="cuda", speedup=1.5, roofline=Roofline.of(10**9, 10**8, 0.2, H100))
    again = Verdict.from_dict(json.loads(v.to_json()))
    assert again.roofline == v.roofline and again.to_dict()["roofline"]["bound"] == "memory"
    older = {k: val for k, val in v.to_dict().items() if k != "roofline"}  # recorded before the field existed
    assert Verdict.from_dict(older).roofline is None


def test_ncus_csv_becomes_kernel_records() -> None:
    launches = parse_ncu_csv(NCU_CSV)
    assert [x.name for x in launches] == [GEMM, FILL, GEMM]
    assert launches[1].metrics["gpu__time_duration.sum"] == pytest.approx(5.12)  # nsecond, in us
    assert STALL.format("mio_throttle") not in launches[0].metrics  # n/a
    gemm, fill = kernel_records(launches, lambda name: "gemm_tile_kernel" in name)
    assert (gemm.label, gemm.calls, gemm.own, fill.label, fill.own) == ("gemm_tile_kernel", 2, True,
                                                                        "at::native::vectorized_elementwise_kernel", False)
    assert gemm.time_us == pytest.approx(2000.0) and fill.time_us == pytest.approx(5.12)
    assert gemm.dram_pct == pytest.approx((82.5 * 1205.5 + 78.0 * 794.5) / 2000)  # weighted by duration
    assert (gemm.registers, gemm.shared_bytes, fill.shared_bytes) == (32, 4100, 0)
    # selected and not_selected are no stalls; the rest largest first
    assert [r for r, _ in gemm.stalls] == ["long_scoreboard", "barrier"]
    assert gemm.stalls[0][1] == pytest.approx((14.2 * 1205.5 + 12.0 * 794.5) / 2000)
    assert gemm.limiter == "DRAM bandwidth"
    assert fill.limiter == "latency (occupancy 30%, most stalls wait)"
    assert KernelRecord("k", 1, 1.0, True, dram_pct=40.0, sm_pct=75.0).limiter == "SM throughput"
    assert KernelRecord("aten::addmm", 1, 1.0, False).limiter is None  # the profiler's list: no metrics
    assert parse_ncu_csv("==PROF== Connected\n==ERROR== no kernels were profiled\n") == []


def test_the_ncu_command_and_its_refusals() -> None:
    cmd = ncu_command("ncu", Path("/s/ncu.csv"), 64, ["python", "-m", "driver"])
    assert cmd[:11] == ["ncu", "--port", "49152", "--max-connections", "64", "--clock-control", "none", "--profile-from-start",
                        "off", "--target-processes", "all"]  # its ports: the ones the ncu pass's sandbox lets it use
    assert cmd[-3:] == ["python", "-m", "driver"] and "--csv" in cmd and cmd[cmd.index("--log-file") + 1] == "/s/ncu.csv"
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert "gpu__time_duration.sum" in metrics and any(m.startswith("regex:") for m in metrics)
    denied = ("==PROF== Connected to process 7\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
              "NVIDIA GPU Performance Counters on the target device 0.\n")
    assert refusal(denied).startswith("ERR_NVGPUCTRPERM - The user does not have permission")
    assert refusal("==ERROR== Failed to initialize the profiler: LibraryNotLoaded") is not None
    assert refusal("==ERROR== The application returned an error code (1).") is None


def _fake_ncu(directory: Path, body: str) -> Path:
    """A stand-in `ncu` on PATH: a Python script with `body`, given `log` (its --log-file)."""
    directory.mkdir()
    script = directory / "ncu"
    script.write_text(f"#!{sys.executable}\nimport sys\nlog = sys.argv[sys.argv.index('--log-file') + 1]\n{body}\n")
    script.chmod(0o755)
    return directory


def test_the_profiler_reads_what_ncu_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ncu runs in the profile pass's sandbox, which reads nothing of the test's: the stand-in carries its CSV
    bin_dir = _fake_ncu(tmp_path / "bin", f"open(log, 'w').write({NCU_CSV!r})")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    task = resolve_task("softmax_rows")
    source = ('import torch\n\nCUDA = "__global__ void gemm_tile_kernel(float* x) {}"\n\n'
              'class ModelNew(torch.nn.Module):\n    pass\n')
    profile = KernelProfiler("cuda", cache_dir=tmp_path / "cache", top=1).profile(task, source)
    assert (profile.tool, profile.note) == (NCU, "")
    (gemm,) = profile.kernels  # the top one of two
    assert gemm.own and gemm.limiter == "DRAM bandwidth" and profile.share(gemm) == pytest.approx(2000 / 2005.12)


def test_a_refusal_is_said_and_remembered_and_the_profiler_lists_the_kernels_instead(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _fake_ncu(tmp_path / "bin", "print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                                          "NVIDIA GPU Performance Counters on the target device 0.'); sys.exit(1)")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    task = resolve_task("mlp_relu")
    profiler = KernelProfiler("cuda", cache_dir=tmp_path / "cache")
    assert profiler.ncu_unavailable() is None
    profile = profiler.profile(task, self_check_source(task))
    assert profile.note.startswith("ncu was refused: ERR_NVGPUCTRPERM")
    assert profiler.ncu_unavailable() == "ncu was refused: ERR_NVGPUCTRPERM - The user does not have permission to access " \
                                        "NVIDIA GPU Performance Counters on the target device 0."
    # on a GPU the fallback lists the kernels; here its CUDA run fails too, which the note says
    assert profile.tool == TORCH_PROFILER or "the profiler's run failed too" in profile.note


def test_without_ncu_the_profiler_lists_the_operators_on_the_cpu(tmp_path: Path) -> None:
    task = resolve_task("mlp_relu")
    profile = KernelProfiler("cpu", cache_dir=tmp_path / "cache", top=3).profile(task, self_check_source(task))
    assert (profile.tool, profile.note) == (TORCH_PROFILER, "ncu profiles CUDA devices only")
    assert len(profile.kernels) == 3 and profile.kernels[0].time_us >= profile.kernels[-1].time_us > 0
    assert "aten::addmm" in [k.name for k in profile.kernels] and profile.total_us >= sum(k.time_us for k in profile.kernels)
    assert KernelProfile.from_dict(json.loads(json.dumps(profile.to_dict()))) == profile
    assert KernelProfiler("cuda", cache_dir=tmp_path).ncu_unavailable() in (
        None, "ncu is not installed here (not on PATH, in CUDA's toolkit or in /opt/nvidia/nsight-compute)")


# A stand-in ncu that reports what its sandbox lets it do, as an ncu error line (the profile's note keeps the first),
# then starts what it was given to profile as ncu would, but with a probe in the driver's place.
PROBING_NCU = """
import json, socket, subprocess
report = {}
for what, path, mode in (("read", SECRET, "r"), ("write", ESCAPE, "w")):
    try:
        open(path, mode).close()
        report[what] = "ok"
    except OSError as e:
        report[what] = type(e).__name__
status = open("/proc/self/status").read()
report["cap_eff"] = int(next(l.split()[1] for l in status.splitlines() if l.startswith("CapEff")), 16)
try:
    with socket.create_server(("127.0.0.1", 49152)), socket.create_connection(("127.0.0.1", 49152), timeout=5):
        report["port"] = "ok"
except OSError as e:
    report["port"] = type(e).__name__
target = sys.argv[sys.argv.index("--metrics") + 2:]
child = subprocess.run(target[:5] + ["kernelcraft.judge.worker.run_tool", "/bin/cat", SECRET], capture_output=True, text=True)
report["child"] = [child.returncode, child.stderr.strip()[-80:]]
print("==ERROR== KCPROBE" + json.dumps(report) + "KCPROBE")
sys.exit(1)
"""


@pytest.mark.skipif(abi_version() < 1 or not isolation().namespaces, reason="needs Landlock and namespaces")
def test_ncu_runs_in_the_profile_pass_s_sandbox_and_so_does_the_driver_it_starts(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """ncu runs candidate code (the driver it starts), so it runs confined as a worker: nothing of the judge's to read
    or write, no capability but the one the GPU's counters need (where the judge is root), its own TCP ports on a
    loopback of its own; the driver it starts is confined too."""
    secret, escape = tmp_path / "secret.txt", tmp_path / "escaped"
    secret.write_text("the judge's")
    bin_dir = _fake_ncu(tmp_path / "bin", f"SECRET, ESCAPE = {str(secret)!r}, {str(escape)!r}\n{PROBING_NCU}")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    task = resolve_task("mlp_relu")
    note = KernelProfiler("cuda", cache_dir=tmp_path / "cache").profile(task, self_check_source(task)).note
    assert note.startswith("ncu profiled no kernel (exit code 1): KCPROBE"), note
    found = json.loads(note.split("KCPROBE")[1])
    cap = counters_capability()
    assert found["cap_eff"] == (1 << cap if cap is not None and os.geteuid() == 0 else 0), found
    assert found["read"] == found["write"] == "PermissionError" and not escape.exists(), found
    assert found["port"] == ("ok" if abi_version() >= 4 else found["port"]), found
    assert found["child"][0] != 0 and "Permission denied" in found["child"][1], found


def test_what_a_pass_leaves_is_read_back_without_following_links(tmp_path: Path) -> None:
    """The pass's scratch is the candidate's: links it leaves in place of its output and its profile, pointing at a
    file of the judge's that it cannot read itself, must not make the judge read that file into the profile."""
    secret = tmp_path / "judge-secret.txt"
    secret.write_text("kc-judge-secret-0815")
    source = (f"import os\nfor name in ('output.log', 'profile.json'):\n    if os.path.lexists(name):\n        os.unlink(name)\n"
              f"    os.symlink({str(secret)!r}, name)\nraise SystemExit(3)\n")
    profile = KernelProfiler("cpu", cache_dir=tmp_path / "cache").profile(resolve_task("mlp_relu"), source)
    assert profile.note == "ncu profiles CUDA devices only; the profiler's run failed too (exit code 3): no output", profile.note


@pytest.mark.gpu
def test_on_the_gpu_ncu_profiles_the_driver_in_its_sandbox_or_the_fallback_says_why(cache_dir: Path) -> None:
    """A Triton ReLU (nothing to build) profiled on the GPU: ncu's metrics come back from the sandboxed pass, or, where
    ncu is missing or refused (ERR_NVGPUCTRPERM: the pass kept counters_capability() and that was not enough), the
    profiler's kernel list does, with the reason. Any other failure of ncu is its sandbox's, and fails the test. The
    fallback alone runs too, as after a refusal. Prints which happened."""
    task = load_task_file(TASKS_DIR / "relu.py")
    source = (CANDIDATES_DIR / "honest_relu_triton.py").read_text()
    profiler = KernelProfiler("cuda", cache_dir=cache_dir, top=3)  # a cache the workers' user can reach, as the judge requires
    why = profiler.ncu_unavailable()
    profile = profiler.profile(task, source)
    print(f"[gpu] ncu: {why or 'tried'}; capability kept: {counters_capability()}; tool {profile.tool!r}, note "
          f"{profile.note!r}, kernels {[(k.name[:60], k.time_us, k.dram_pct) for k in profile.kernels]}")
    if profile.tool == NCU:
        top = profile.kernels[0]
        assert top.own and top.time_us > 0 and top.dram_pct is not None and top.limiter, top
    else:
        assert why is not None or profile.note.startswith("ncu was refused: ERR_NVGPUCTRPERM"), \
            f"ncu failed in its sandbox: {profile.note}"
        assert profile.tool == TORCH_PROFILER and profile.kernels and profile.kernels[0].own, profile
    profiler._refused = "ncu was refused here: the fallback alone"  # as a refusal leaves it (ncu_unavailable)
    fallback = profiler.profile(task, source)
    print(f"[gpu] the fallback: {[(k.name[:60], k.time_us) for k in fallback.kernels]}")
    assert fallback.tool == TORCH_PROFILER and fallback.note == "ncu was refused here: the fallback alone"
    assert fallback.kernels[0].own and fallback.kernels[0].time_us > 0, fallback


def test_ncu_off_the_path_is_found_in_cuda_s_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    ncu = tmp_path / "bin" / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert find_ncu() == str(ncu)


def _correct(speedup: float, roofline: Roofline | None) -> Verdict:
    return Verdict(status=Status.CORRECT, task="t", device="cuda", message=f"correct; {speedup:.2f}x", speedup=speedup,
                   significant=True, reference=TimingStats.of([1.0]), candidate=TimingStats.of([1.0 / speedup]),
                   roofline=roofline)


def test_the_feedback_tells_the_roofline_and_each_top_kernels_limiter() -> None:
    roof = Roofline.of(0, 3 * 10**8, 0.4, H100)
    kernels = KernelProfile(NCU, kernel_records(parse_ncu_csv(NCU_CSV), lambda name: "gemm" in name), 2005.12)
    text = Coder.feedback(_correct(1.5, roof), kernels).content
    assert "On the hardware: 750 GB/s (25% of the device's 3000)" in text and "TFLOP/s" not in text  # no FLOPs counted
    assert "The task is memory-bound: your kernel reaches 25% of its roofline." in text
    assert ("- gemm_tile_kernel: 2000.0 us in 2 launches, 100% of the kernel time; DRAM 81% and SM 30% of peak, occupancy 60%, "
            "32 registers/thread, 4 KiB shared memory/block: limited by DRAM bandwidth") in text
    assert "- at::native::vectorized_elementwise_kernel (not yours): 5.1 us in 1 launch" in text
    assert text.index("On the hardware") < text.index("Make it faster")
    gemm = Coder.feedback(_correct(2.0, Roofline.of(2 * 4096**3, 10**8, 0.5, H100))).content
    assert "275 TFLOP/s (46% of the device's 600)" in gemm and "compute-bound" in gemm and "Top kernels" not in gemm
    wrong = Verdict(status=Status.INCORRECT, task="t", device="cuda", message="seed 1: wrong")
    assert "On the hardware" not in Coder.feedback(wrong, kernels).content


class _RooflineJudge(StubJudge):
    """The stub judge's correct verdicts, each with a roofline."""

    def submit(self, job: Job) -> "Future[Result]":
        result = super().submit(job).result()
        v = result.verdict
        v.roofline = Roofline.of(0, 10**8, v.candidate.median_ms, H100)
        future: Future[Result] = Future()
        future.set_result(Result(job, v))
        return future


class _FakeProfiler:
    """A profiler where ncu runs: records what it profiled."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    def ncu_unavailable(self) -> str | None:
        return None

    def profile(self, task: object, source: str) -> KernelProfile:
        self.sources.append(source)
        return KernelProfile(NCU, [KernelRecord("void fused_kernel(float*)", 1, 42.0, True, 85.0, 20.0, 50.0, 40, 0,
                                                [("long_scoreboard", 9.0)])], 42.0)


def test_optimize_profiles_each_correct_verdict_once_and_tells_the_model_and_the_report(tmp_path: Path) -> None:
    tasks = tiny_tasks(1)
    config = OptimizeConfig(target="tiny", device="cpu", llm=LLMConfig(model="scripted"),
                            search=SearchConfig(strategy="refine", turns=2, samples=1))
    backend, profiler = Scripted(), _FakeProfiler()
    with Store(tmp_path / "ws") as store:
        optimizer = Optimizer(config, store, LLMClient(backend, config.llm), _RooflineJudge(), DEVICE)  # type: ignore[arg-type]
        assert (optimizer.profiler, optimizer.no_profile) == (None, "ncu profiles CUDA devices only")
        optimizer.profiler = profiler  # type: ignore[assignment]  # as on a GPU with ncu
        result = optimizer.run(optimizer.start(tasks), tasks)
        attempts = store.attempts(result.run_id)
        assert [a.status for a in attempts] == ["correct", "correct"]
        assert len(profiler.sources) == len({a.verdict_id for a in attempts})  # once per verdict, after it
        assert store.kernel_profile(attempts[0].verdict_id) == profiler.profile(None, "")
        html = render_report(load_run(store, result.run_id))
    told = backend.asked[1].messages[-1].content
    assert "On the hardware" in told and "- fused_kernel: 42.0 us in 1 launch" in told and "limited by DRAM bandwidth" in told
    assert "roofline: " in html and "of the memory roof" in html and "top kernels by ncu" in html and "fused_kernel" in html

    off = config.model_copy(update={"search": config.search.model_copy(update={"profile": False})})
    template = config.model_copy(update={"search": SearchConfig(strategy="template")})
    with Store(tmp_path / "ws2") as store:
        client = LLMClient(backend, config.llm)
        assert Optimizer(off, store, client, StubJudge(), DEVICE).no_profile == "turned off"  # type: ignore[arg-type]
        template_run = Optimizer(template, store, client, StubJudge(), DEVICE)  # type: ignore[arg-type]
        assert template_run.no_profile == "the template strategy tells no model"


def test_profile_judges_then_gives_the_roofline_and_the_kernels(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "fast.toml").write_text(FAST_TOML)
    cand = CANDIDATES / "cpu" / "leaky_relu_clamp.py"
    p = kc("profile", "leaky_relu_clamp", str(cand), "--device", "cpu", "--config", "fast.toml", "--json", cwd=tmp_path,
           cache=cache_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "correct" and out["verdict_id"] == 1
    roof = out["roofline"]
    assert roof["bound"] == "memory" and roof["flops"] == 0 and roof["gbps"] > 0 and 0 < roof["share"] == roof["memory_share"]
    assert roof["bytes"] == 2 * 4 * 4096 * 1024  # the task's input and output, float32
    kernels = out["kernels"]
    assert (kernels["tool"], kernels["note"]) == (TORCH_PROFILER, "ncu profiles CUDA devices only")
    # the extension's function is no operator: its time is the forward's own, the candidate's
    assert kernels["kernels"][0]["name"] == OWN_CODE and kernels["kernels"][0]["own"]
    with Store(tmp_path / "ws") as store:
        assert store.kernel_profile(1) == KernelProfile.from_dict(kernels)
