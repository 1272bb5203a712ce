"""The timing recipe (docs/judge.md), worker side.

The judge's clocks are captured when this module is imported, before any candidate code runs,
so a candidate that replaces `torch.cuda.synchronize` or `Event.elapsed_time` changes nothing
the judge calls (and the guard reports the replacement).

Nothing here can be predicted from inside the process: each timed round's input set and roll come
from a `Rounds` source drawn as the round starts (the judge's, for a candidate: rounds.py), and
local draws come from the OS's randomness, never from a seeded generator.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

import torch

from ..config import TimingConfig

_perf_ns = time.perf_counter_ns
_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_event_sync = torch.cuda.Event.synchronize
_elapsed = torch.cuda.Event.elapsed_time
_roll = torch.roll
_mm = torch.mm  # the sustained scenario's heating
_PROBE_LOOPS = 500
_PIN_PROBES = 8  # probes per CPU when picking the fastest
_PIN_WINDOW = 5  # the last probes whose median says the pinned CPU has slowed


def host_probe() -> float:
    """Milliseconds of a fixed piece of pure-Python work: how fast the host runs this process at this
    moment (a busy machine, a slower core). Nothing in it reaches torch, so no operator that a
    candidate re-registers slows it; interpreter hooks that would are refused by the guard."""
    t0 = _perf_ns()
    acc = 0
    for i in range(_PROBE_LOOPS):
        acc ^= i * 31
    return (_perf_ns() - t0) / 1e6


def thread_ids() -> list[int]:
    """The ids of this process's threads, native ones included (Linux)."""
    return [int(t) for t in os.listdir("/proc/self/task")]


_pinned: set[int] | None = None  # the CPUs FastCpu put the whole process on, while it does


def pinned_cpus() -> set[int] | None:
    """The CPUs every thread of this process is held to now (FastCpu on the CPU device), or None."""
    return _pinned


def _pin_process(cpus: set[int]) -> None:
    """Every thread onto `cpus`: sched_setaffinity(0) moves only the calling thread, and a thread takes
    its creator's CPUs only when it is created (an OpenMP pool started in the warm-up would stay put)."""
    _pin_threads(set(thread_ids()), cpus)


def _pin_threads(tids: set[int], cpus: set[int]) -> None:
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:  # it ended meanwhile
            pass


class FastCpu:
    """Keeps the timed work on the CPUs where the host probe runs fastest now, and moves it when they
    slow. On a virtual machine the vCPUs' speeds differ by about 2x and change within a minute
    (a small GEMM's timed call 31 us on some vCPUs, 45-66 us on the others, the probe telling them
    apart: benchmarks/timing_contention.py --per-cpu, H100 VM); unpinned, one measurement wanders
    between both kinds. Both sides of every round run on the same CPUs. `threads` None: the calling
    thread alone, on the fastest CPU (CUDA: the timed work is the device's; the driver's threads stay
    where they are). `threads` n: every thread of the process on the n fastest CPUs (the CPU device:
    the candidate's and the reference's thread pools do the timed work, n = cpu_threads). Where
    affinity cannot be set, or there are no more CPUs than it needs, it does nothing."""

    def __init__(self, slower_than: float, threads: int | None = None) -> None:
        self.allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.slower_than = slower_than
        self.count = threads or 1
        self.whole_process = threads is not None
        self.picked: list[int] = []  # every CPU pinned to, in order (count per pick)
        self.best_ms = 0.0
        self.recent: list[float] = []
        self.threads_before: set[int] = set()  # threads that ran before the first pick

    def pick(self) -> None:
        if len(self.allowed) <= self.count:
            return
        if not self.picked:
            self.threads_before = set(thread_ids())
        speeds = {}
        for cpu in self.allowed:
            os.sched_setaffinity(0, {cpu})
            speeds[cpu] = statistics.median(host_probe() for _ in range(_PIN_PROBES))
        fastest = sorted(self.allowed, key=speeds.__getitem__)[:self.count]
        self._pin(set(fastest))
        self.picked.extend(sorted(fastest))
        # The probe may run on any of them: the slowest one chosen is the speed to hold.
        self.best_ms, self.recent = max(speeds[cpu] for cpu in fastest), []

    def _pin(self, cpus: set[int] | None) -> None:
        """Onto `cpus`; None: back onto every CPU allowed."""
        global _pinned
        target = set(self.allowed) if cpus is None else cpus
        if self.whole_process:
            _pin_process(target)
            _pinned = cpus
        else:
            os.sched_setaffinity(0, target)

    def observe(self, probe_ms: float) -> None:
        """One probe on the pinned CPUs; pick again when the recent ones have slowed."""
        if not self.picked:
            return
        self.recent = (self.recent + [probe_ms])[-_PIN_WINDOW:]
        if len(self.recent) == _PIN_WINDOW and statistics.median(self.recent) > self.slower_than * self.best_ms:
            self.pick()

    def release(self) -> None:
        """Back onto every CPU allowed, with the threads started meanwhile, which took the pinned thread's CPUs."""
        if self.picked:
            self._pin(None)
            if not self.whole_process:
                _pin_threads(set(thread_ids()) - self.threads_before, set(self.allowed))


@contextmanager
def pinned(cfg: TimingConfig, cuda: bool) -> Iterator[FastCpu | None]:
    """FastCpu as the timing configures it, from pick to release: every call of a candidate's runs so
    (correctness, profile, timing), so its CPU affinity never tells it that it is being timed."""
    # On the CPU as many CPUs as torch's threads (cpu_threads; the guard holds torch to it).
    pin = FastCpu(cfg.fast_cpu_slower_than, None if cuda else torch.get_num_threads()) if cfg.fast_cpu else None
    try:
        if pin is not None:
            pin.pick()
        yield pin
    finally:
        if pin is not None:
            pin.release()


class Clock:
    """Times one call: L2 flushed, device idle at the start, whole device synchronised before the end event.
    With `pause` (the server scenario), the device then idles for the pause, which is not timed.
    `host_ms` is the last call's host time until it returned (on CUDA: from the start event on), the
    part of a short call's time that is launch overhead rather than kernel."""

    def __init__(self, device: torch.device, cfg: TimingConfig, pause: Callable[[], None] | None = None,
                 settle: Callable[[], dict[str, Any]] | None = None) -> None:
        self.cuda = device.type == "cuda"
        nbytes = cfg.flush_bytes if self.cuda else cfg.cpu_flush_bytes
        self.flush_buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self.pause = pause
        self.settle = settle  # run before the timed rounds (the sustained scenario's heating): what it found
        self.settled: dict[str, Any] | None = None
        self.host_ms = 0.0
        if self.cuda:
            # Made (and recorded once, which creates them) here, so creating them is not timed.
            self.start, self.end = _Event(enable_timing=True), _Event(enable_timing=True)
            _record(self.start)
            _record(self.end)

    def time_call(self, fn: Callable[..., Any], args: list[Any]) -> tuple[float, Any]:
        self.flush_buf.zero_()
        if self.pause is not None:
            if self.cuda:
                _sync()
            self.pause()
        if self.cuda:
            _sync()
            t0 = _perf_ns()
            _record(self.start)
            out = fn(*args)
            self.host_ms = (_perf_ns() - t0) / 1e6
            _sync()  # work on side streams and threads is counted
            _record(self.end)
            _event_sync(self.end)
            return float(_elapsed(self.start, self.end)), out
        t0 = _perf_ns()
        out = fn(*args)
        self.host_ms = (_perf_ns() - t0) / 1e6
        return self.host_ms, out


def server_pause(qps: float, rng: random.Random | None = None) -> Callable[[], None]:
    """Idle time before each call of the server scenario: exponential with mean 1/QPS, as the gaps
    between requests of inference traffic (caches and clocks cool between calls). The judge's draws
    come from the OS (nothing in a candidate's process predicts them); a benchmark may pass its own `rng`."""
    rng = rng or random.SystemRandom()

    def pause() -> None:
        time.sleep(rng.expovariate(qps))
    return pause


def heat(device: torch.device, min_s: float, max_s: float) -> dict[str, Any]:
    """Keep the device busy with a large matmul, over and over, as a training job keeps it, until its clock
    has settled (`clock_settled`), at least `min_s` and at most `max_s` seconds. The clock is the SM clock on
    CUDA (NVML), the current CPU's frequency on the CPU (cpufreq), where either can be read; unread, it heats
    `min_s`. Returns the seconds it heated, the readings at the end (clock_info), the clock it ended at, the
    median of the last window and whether it settled (False: `max_s` ran out first)."""
    cuda = device.type == "cuda"
    n = 8192 if cuda else 512
    a = torch.randn(n, n, device=device, dtype=torch.float16 if cuda else torch.float32)
    out = torch.empty_like(a)
    readings: list[tuple[float, float]] = []
    mhz, settled = None, False
    t0 = time.monotonic()
    while (elapsed := time.monotonic() - t0) < max_s:
        for _ in range(8):
            _mm(a, a, out=out)
        if cuda:
            _sync()
        mhz = _clock_mhz(cuda)
        if mhz is None:
            if elapsed >= min_s:
                break
            continue
        readings = [(t, m) for t, m in readings if elapsed - t <= 2 * _SETTLE_WINDOW_S] + [(elapsed, mhz)]
        if elapsed >= min_s and clock_settled(readings, elapsed):
            settled = True
            break
    del a, out
    last = _window_median(readings, readings[-1][0], 0) if readings else None
    return {"heat_s": time.monotonic() - t0, **clock_info(), "clock_mhz": mhz, "window_median_mhz": last,
            "settled": settled}


# A device at its power limit does not hold one clock: an H100 under the heating matmul moves between about
# 1,290 and 1,410 MHz from one reading to the next, and a rule on the spread of the readings never held in
# its 10 s. What settles is the level: the median of the last window against the median of the one before.
_SETTLE_WINDOW_S = 1.0
_SETTLE_SPREAD = 0.02


def clock_settled(readings: list[tuple[float, float]], now: float) -> bool:
    """Whether (seconds, MHz) `readings` have settled by `now`: the median of the last `_SETTLE_WINDOW_S` is
    within `_SETTLE_SPREAD` of the median of the window before it, both windows read (the first reading at
    least 1.9 windows back)."""
    a, b = _window_median(readings, now, 0), _window_median(readings, now, 1)
    if a is None or b is None or readings[0][0] > now - 1.9 * _SETTLE_WINDOW_S:
        return False
    return abs(a - b) <= _SETTLE_SPREAD * max(a, b)


def _window_median(readings: list[tuple[float, float]], now: float, back: int) -> float | None:
    """The median MHz of the readings in window `back` before `now` (0: the last `_SETTLE_WINDOW_S`), or None."""
    window = [m for t, m in readings if back * _SETTLE_WINDOW_S <= now - t < (back + 1) * _SETTLE_WINDOW_S]
    return statistics.median(window) if window else None


def _clock_mhz(cuda: bool) -> float | None:
    """The SM clock (CUDA) or this thread's CPU's current frequency, in MHz, or None where it cannot be read."""
    try:
        if cuda:
            return float(torch.cuda.clock_rate())
        with open("/proc/thread-self/stat") as f:
            cpu = int(f.read().rsplit(")", 1)[1].split()[36])  # field 39: the CPU it last ran on
        with open(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq") as f:
            return int(f.read()) / 1000
    except Exception:  # noqa: BLE001 - NVML or cpufreq missing or not permitted: the reading is optional
        return None


def scenario_clock(device: torch.device, cfg: TimingConfig, scenario: str | None) -> tuple[TimingConfig, Clock]:
    """The timing settings and clock of a scenario: offline (calls back to back), "server" (an untimed
    exponential pause before every call, and the server scenario's iteration cap) or "sustained" (calls
    back to back once the device has been heated until its clock settled)."""
    cfg = cfg.for_scenario(scenario)
    pause = server_pause(cfg.server_qps) if scenario == "server" else None
    settle = (lambda: heat(device, cfg.sustained_min_heat_s, cfg.sustained_heat_s)) if scenario == "sustained" else None
    return cfg, Clock(device, cfg, pause, settle)


def clone_inputs(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def fresh_inputs(base: list[Any], roll: int, fresh: bool) -> list[Any]:
    """New contents for every timed iteration: each tensor rolled by an offset drawn from `roll`
    (same values, same dtype and domain, different positions), so nothing keyed on contents or
    addresses repeats. Deterministic in (base, roll): the trusted worker makes a checked round's
    inputs again from its own copy of the input set."""
    if not fresh:
        return clone_inputs(base)
    shifts = random.Random(roll)
    out = []
    for x in base:
        if isinstance(x, torch.Tensor) and x.numel() > 1:
            out.append(_roll(x.reshape(-1), shifts.randrange(1, x.numel())).reshape(x.shape))
        else:
            out.append(x.clone() if isinstance(x, torch.Tensor) else x)
    return out


# A timed round's input set and roll (the seed of its shifts), drawn as round `i` of `iters` starts.
Rounds = Callable[[int, int], tuple[int, int]]
AfterCall = Callable[[str, int, Any], None]


def local_rounds(sets: int) -> Rounds:
    """Rounds drawn in this process from the OS's randomness, the input sets in turn: the warm-up's,
    and the trusted worker's own timing (no candidate there)."""
    rng = random.SystemRandom()
    return lambda i, iters: (i % sets, rng.getrandbits(63))


def _round(sides: list[tuple[str, Callable[..., Any]]], base: list[Any], roll: int, clock: Clock,
           cfg: TimingConfig) -> Iterator[tuple[str, float, Any]]:
    """One ABAB round: fresh inputs, each side its own copy (made before any side runs), each timed."""
    live = fresh_inputs(base, roll, cfg.fresh_inputs)
    copies = [live] + [clone_inputs(live) for _ in sides[1:]]
    for (name, fn), args in zip(sides, copies):
        ms, out = clock.time_call(fn, args)
        yield name, ms, out
        del out  # released before the next side runs, as the caller releases its own reference


def run_interleaved(
    sides: list[tuple[str, Callable[..., Any]]],
    input_sets: list[list[Any]],
    clock: Clock,
    cfg: TimingConfig,
    rounds: Rounds,
    after_call: AfterCall,
    host_ms: dict[str, list[float]] | None = None,
    probe_ms: list[float] | None = None,
    cpus: list[int] | None = None,
    pin_warmup: bool = False,
) -> dict[str, list[float]]:
    """Time `sides` ABAB... over fresh inputs, each timed round's set and roll from `rounds`. Returns
    samples (ms) per side, first timed sample discarded. `after_call(side, i, out)` sees every call's
    output: i is the timed round (0 for the discarded one), -1 in the warm-up. `host_ms`, if given,
    receives each kept sample's host time (Clock.host_ms) per side; `probe_ms` one `host_probe` after
    each kept round, next in time to the samples it describes; `cpus` the CPUs the timed rounds were
    pinned to (cfg.fast_cpu), in order. The warm-up runs unpinned unless `pin_warmup` (a candidate's,
    whose every call runs pinned): what it compiles or tunes may start processes, which would inherit
    the pin."""
    r = len(input_sets)
    warm_rounds = local_rounds(r)
    warm: dict[str, list[float]] = {name: [] for name, _ in sides}
    samples: dict[str, list[float]] = {name: [] for name, _ in sides}
    with ExitStack() as held:
        pin = held.enter_context(pinned(cfg, clock.cuda)) if pin_warmup else None
        calls = 0
        while calls < cfg.warmup_calls or min(map(sum, warm.values())) < cfg.warmup_ms:
            k, roll = warm_rounds(calls, 0)
            for name, ms, out in _round(sides, input_sets[k], roll, clock, cfg):
                warm[name].append(ms)
                after_call(name, -1, out)
                del out
            calls += 1
            if calls >= 200:
                break
        # The median warm-up call, not the mean: a first call that loads modules or allocates (a
        # hundred milliseconds and more on a large GEMM) would cut the iterations several times over.
        per_call = max(statistics.median(times) for times in warm.values())
        iters = int(min(cfg.max_iters, max(cfg.min_iters, cfg.target_ms / max(per_call, 1e-3))))
        if not pin_warmup:
            pin = held.enter_context(pinned(cfg, clock.cuda))
        if clock.settle is not None:  # last before the rounds: they begin at the state it left
            clock.settled = clock.settle()
        try:
            for i in range(iters + 1):
                k, roll = rounds(i, iters)
                for name, ms, out in _round(sides, input_sets[k], roll, clock, cfg):
                    if i > 0:  # the first timed sample is discarded
                        samples[name].append(ms)
                        if host_ms is not None:
                            host_ms.setdefault(name, []).append(clock.host_ms)
                    after_call(name, i, out)
                    del out
                if (i > 0 and probe_ms is not None) or pin is not None:
                    probe = host_probe()
                    if i > 0 and probe_ms is not None:
                        probe_ms.append(probe)
                    if pin is not None:
                        pin.observe(probe)
        finally:
            if pin is not None and cpus is not None:
                cpus.extend(pin.picked)
    return samples


def host_medians(host_ms: dict[str, list[float]], probe_ms: list[float], cpus: list[int]) -> dict[str, Any]:
    """What a timing answer carries next to its samples about the host: each side's median host time,
    the host probe's median, and the CPUs the rounds were pinned to."""
    return {"host_ms": {name: statistics.median(xs) for name, xs in host_ms.items()},
            "probe_ms": statistics.median(probe_ms) if probe_ms else None, "cpus": cpus}


def clock_info() -> dict[str, Any]:
    """SM clock and temperature, where NVML can be read; clocks cannot be locked on shared machines."""
    info: dict[str, Any] = {}
    if torch.cuda.is_available():
        for key, fn in (("sm_clock_mhz", torch.cuda.clock_rate), ("temperature_c", torch.cuda.temperature)):
            try:
                info[key] = fn()
            except Exception:  # noqa: BLE001 - NVML missing or not permitted: the reading is optional
                info[key] = None
    return info


def clocks(before: dict[str, Any], clock: Clock) -> dict[str, Any]:
    """What a timing answer says of the device's clocks: before the warm-up, after heating (the sustained
    scenario: the clock its rounds ran at), and after the rounds."""
    return {"before": before, **({"settled": clock.settled} if clock.settled is not None else {}), "after": clock_info()}
