"""Every message between the judge (the parent) and a worker, typed, and their one encoding.

One JSON object a line each way: the parent's end is worker_process.WorkerProcess, the worker's worker/channel.py.
- Commands, parent to worker: `{"op": ..., **fields}`, answered once.
- Answers, worker to parent: `{"ok": true, **fields}` (the command's ANSWER), or a `Failure` with `"ok": false`.
- Requests, worker to parent in the middle of a command (what the candidate's process must not do or
  decide itself: a build, a timed round's draw, whether to check it, a spot check): `{"request": ..., **fields}`,
  each answered by the parent with its REPLY before the worker goes on.
- A profile pass (worker/profile_driver.py, after a verdict): no pipe, but a `ProfileSpec` file the judge writes in
  the driver's scratch and a `ProfileOutput` file the driver writes back there.
Every line also carries the judge's nonce (sandbox.py), which is no part of a message here.

`encode` gives a message's JSON object, `decode_*` the message of one: one that is not a message of the
kind expected (an unknown op or request, a field missing or unknown, a nested value that is not what it
names) is a ProtocolError. What comes from a candidate's worker is untrusted input: the candidate's code
can write to that process's pipe as well as the worker can. Standard library only: the worker imports it.

One module over 400 lines on purpose: every message of the trust boundary, and its one encoding, in one place.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, ClassVar, Union

from .config import JudgeConfig

# What torch's load_inline reads for the CUDA architectures it builds for (unset or empty: the device's own), and
# the values a build request may carry: entries such as 9.0, 9.0a, 10.0f or 8.6+PTX, one ";" or space apart.
ARCH_VARIABLE = "TORCH_CUDA_ARCH_LIST"
_ARCH_ENTRY = r"\d{1,2}\.\d[af]?(?:\+PTX)?"
ARCH_LIST_RE = re.compile(rf"(?:{_ARCH_ENTRY}(?:[; ]{_ARCH_ENTRY}){{0,15}})?")


class ProtocolError(Exception):
    """A line that is not the message expected (from a candidate's worker: forged?)."""


@dataclass
class Facts:
    """What the parent learns about the reference once (ReferenceData is built from it)."""

    meta: list[list[dict[str, Any]]] = field(default_factory=list)
    aliases_input: bool = False
    mutates_inputs: bool = False
    input_s: float = 0.0  # the slowest seed's input generation
    call_s: float = 0.0  # the median forward call over the seeds
    truth: str = ""  # "float64" or why the reference's own output is the truth
    truth_s: float = 0.0
    binary: list[dict[str, Any]] = field(default_factory=list)  # per 0/1 input set: seed, p, share
    input_bytes: int = 0
    output_bytes: int = 0
    peak_bytes: int = 0  # device memory one seed's expected outputs take to compute (cuda)
    cached: bool = False  # every seed's expected outputs held, nothing recomputed per comparison


@dataclass
class Mismatch:
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    rel_l2: float = 0.0
    bad: int = 0  # elements outside tolerance
    total: int = 0
    worst_index: list[int] | None = None
    worst_got: float | None = None
    worst_expected: float | None = None
    reason: str = ""
    # Against a float64 truth (compare_with_truth): the errors above are the candidate's against the
    # truth, these the task-dtype reference's own, and worst_expected is the truth.
    truth: bool = False
    truth_factor: float = 0.0  # k: how many times the reference's own error a candidate may have
    ref_max_abs: float = 0.0
    ref_rel_l2: float = 0.0
    forged: bool = False  # the candidate's process handed over outputs that could not be read as shared

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if self.reason:
            return self.reason
        where = f" at index {tuple(self.worst_index)}" if self.worst_index is not None else ""
        if self.truth:
            return (f"{self.bad}/{self.total} elements outside tolerance of the float64 truth and over {self.truth_factor:g}x the "
                    f"reference's own error; worst{where}: got {self.worst_got:.6g}, exact {self.worst_expected:.6g} "
                    f"(candidate vs truth: max abs {self.max_abs:.3g}, rel L2 {self.rel_l2:.3g}; reference vs truth: "
                    f"max abs {self.ref_max_abs:.3g}, rel L2 {self.ref_rel_l2:.3g})")
        return (f"{self.bad}/{self.total} elements outside tolerance; worst{where}: got {self.worst_got:.6g}, "
                f"expected {self.worst_expected:.6g} (max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}, "
                f"rel L2 {self.rel_l2:.3g})")


# -- commands (parent -> worker) ---------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """Every worker's first command: its role ("reference" or "candidate"), device, configuration and
    precision, the task (none for the device ceilings) and what the build cache needs."""

    OP: ClassVar[str] = "setup"
    role: str
    device: str
    config: JudgeConfig
    dtype: str
    atol: float
    rtol: float
    init_seed: int
    cache_dir: str
    judge_uid: int
    capability: str
    task_source: str | None = None
    sizes: dict[str, Any] = field(default_factory=dict)
    nonce: str = ""  # set by the parent's end as it sends the command (worker_process.WorkerProcess.call)


@dataclass(frozen=True)
class Survey:
    """Reference: the secret seeds' expected outputs (held up to `cache_bytes`), the reference's facts,
    FLOPs and bytes."""

    OP: ClassVar[str] = "survey"
    seeds: list[int]
    binary_seeds: list[int]
    cache_bytes: int


@dataclass(frozen=True)
class Probe:
    """Reference: one forward's input and output bytes and peak device memory."""

    OP: ClassVar[str] = "probe"
    seed: int


@dataclass(frozen=True)
class SharedOutputs:
    """A candidate's outputs as its worker shared them (`tensors` as worker/exchange.SharedTensor.to_dict
    gives them, `values` the plain outputs; `memfd`: a memory file comes over the socket), and the
    tolerance to compare them with."""

    tensors: list[Any]
    values: list[Any]
    atol: float
    rtol: float
    memfd: bool


@dataclass(frozen=True)
class CompareSeed(SharedOutputs):
    """Reference: a candidate's outputs for one seed (`kind` "seed" or "binary", `index`) against what they
    should be; `k`: the truth factor."""

    OP: ClassVar[str] = "compare"
    kind: str
    index: int
    k: float


@dataclass(frozen=True)
class CompareRound(SharedOutputs):
    """Reference: a timed call's shared outputs against the reference on that round's inputs, made from the
    input set's `seed` and the round's `roll` (`fresh`: inputs are rolled at all); `truth`: the float64
    truth decides where the plain comparison fails; `k`: the truth factor."""

    OP: ClassVar[str] = "spot_check"
    seed: int
    roll: int
    fresh: bool
    truth: bool
    k: float


@dataclass(frozen=True)
class PrepareTiming:
    """Either role: make the timing inputs of `seeds` before the device lock is taken."""

    OP: ClassVar[str] = "prepare_timing"
    seeds: list[int]


@dataclass(frozen=True)
class TimeReference:
    """Reference: the reference timed alone (with `defaults`, also eager and torch.compile at PyTorch's
    defaults; with `tunableop`, under TunableOp, its results kept in `out_dir`), offline or `scenario`."""

    OP: ClassVar[str] = "time_reference"
    seeds: list[int]
    release_inputs: bool = False
    target_ms: float | None = None
    defaults: bool = False
    tunableop: bool = False
    scenario: str | None = None
    out_dir: str = ""


@dataclass(frozen=True)
class PrepareBaselines:
    """Reference: torch.compile the reference (if `compiled`) and call it once, before the device lock."""

    OP: ClassVar[str] = "prepare_baselines"
    seeds: list[int]
    compiled: bool


@dataclass(frozen=True)
class Vet:
    """Reference: the task's vetting (kernelcraft.tasks.vet) on `seeds`."""

    OP: ClassVar[str] = "vet"
    seeds: list[int]


@dataclass(frozen=True)
class MeasureCeilings:
    """Reference (no task): the device's memory bandwidth and matmul peak."""

    OP: ClassVar[str] = "ceilings"


@dataclass(frozen=True)
class Load:
    """Candidate: import the candidate (its extensions built by the judge, at its requests) and make ModelNew."""

    OP: ClassVar[str] = "load"
    candidate_source: str
    task_source: str


@dataclass(frozen=True)
class RunSeed:
    """Candidate: one call on a secret seed (or, with `binary_p`, 0/1 inputs), its outputs shared and held
    until `Release`; `poison_bytes` of allocator memory filled with NaN first; with `guard_output_bytes`,
    inside guard zones."""

    OP: ClassVar[str] = "run_seed"
    seed: int
    when: str
    binary_p: float | None = None
    poison_bytes: int = 0
    guard_output_bytes: int | None = None


@dataclass(frozen=True)
class Release:
    """Candidate: drop the outputs held for the trusted side."""

    OP: ClassVar[str] = "release"


@dataclass(frozen=True)
class SecondShape:
    """Candidate: the candidate at the task's check `sizes`, against the reference in its own process."""

    OP: ClassVar[str] = "second_shape"
    sizes: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class Profile:
    """Candidate: profiled calls on `seed`'s inputs; `kernel_names`: the __global__ names of its source."""

    OP: ClassVar[str] = "profile"
    seed: int
    kernel_names: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Time:
    """Candidate: ABAB timing of candidate and reference over the timing inputs of `seeds`, offline or
    `scenario`, its rounds drawn and checked by the judge (requests RoundStart, RoundTimed, RoundOutputs)."""

    OP: ClassVar[str] = "time"
    seeds: list[int]
    scenario: str | None = None


@dataclass(frozen=True)
class Exit:
    """Either role: answer, then end the process."""

    OP: ClassVar[str] = "exit"


# -- answers (worker -> parent) ----------------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    """A command that did not finish: a verdict status (hack_detected, incorrect, load_failed, build_failed,
    runtime_error, task_error, judge_error), why, whether the device ran out of memory, and the seconds a
    failed load spent building."""

    status: str
    message: str
    oom: bool = False
    build_s: float = 0.0


@dataclass(frozen=True)
class Done:
    """A command that has nothing to report."""


@dataclass(frozen=True)
class SetupDone:
    """A set-up worker: its environment and the seconds the task's own setup took (none without a task)."""

    env: dict[str, Any] = field(default_factory=dict)
    task_setup_s: float = 0.0


@dataclass(frozen=True)
class Surveyed:
    facts: Facts
    flops: int
    bytes: int
    param_bytes: int
    env: dict[str, Any]


@dataclass(frozen=True)
class Probed:
    input_bytes: int
    output_bytes: int
    peak_bytes: int


@dataclass(frozen=True)
class Compared:
    """One Mismatch per output (a forged description is a Failure of status hack_detected instead)."""

    mismatches: list[Mismatch]


@dataclass(frozen=True)
class Timed:
    """Samples (ms) per side, the SM clock before and after, each side's median host time, the host probe's
    median and the CPUs the rounds ran on; a candidate's timing also the seconds of its phases."""

    samples: dict[str, list[float]]
    clocks: dict[str, Any]
    host_ms: dict[str, float]
    probe_ms: float | None
    cpus: list[int]
    phases_s: dict[str, float] | None = None


@dataclass(frozen=True)
class BaselinesPrepared:
    compile_s: float | None = None  # None: nothing was compiled


@dataclass(frozen=True)
class Vetted:
    report: dict[str, Any]  # tasks.vet's report, as its to_dict gives it
    env: dict[str, Any]


@dataclass(frozen=True)
class CeilingsMeasured:
    ceilings: dict[str, Any]
    env: dict[str, Any]


@dataclass(frozen=True)
class Loaded:
    build_s: float
    load_s: float
    build_keys: list[str]
    weights_copied: Any
    kernel_names: list[str]


@dataclass(frozen=True)
class SeedRun:
    """One seed's call: each output described (expected.describe_output), the tensors as shared and the
    plain values, the inputs it modified, whether an output shares an input's memory, the guard zones'
    report, and the native threads it added."""

    meta: list[dict[str, Any]]
    tensors: list[Any]
    values: list[Any]
    mutated: list[int]
    aliases_input: bool
    guard: dict[str, Any] | None
    native_thread_growth: int


@dataclass(frozen=True)
class ShapeChecked:
    match: bool | None  # None: the check size could not be built
    message: str


@dataclass(frozen=True)
class KernelTime:
    """One kernel of a profiled call on CUDA, its runs added up: its name as the profiler gave it (cut short),
    its device time and share of the call's, and whether the judge counted it as the candidate's own, or why not."""

    name: str
    us: float
    share: float
    own: bool
    why_not: str = ""


@dataclass(frozen=True)
class Profiled:
    """What the profiled calls found (coverage.profile_call); the fields after `calls` on CUDA only.
    `kernels`: the call's largest kernels, largest first."""

    custom_launches: int
    calls: dict[str, int]
    coverage: float
    custom_kernels: list[str] | None = None
    device_us: float | None = None
    kernels: list[KernelTime] | None = None
    graph_runs: int | None = None
    graph_launches: int | None = None
    device_peak_bytes: int = 0


# -- requests (worker -> parent, in the middle of a command) and their replies --------------------

@dataclass(frozen=True)
class Built:
    """A build request's reply: the key's build is published (`ok`), or why not."""

    ok: bool
    message: str = ""
    machine_fault: bool = False


@dataclass(frozen=True)
class BuildRequest:
    """While the candidate loads: build what its `load_inline` call (`arguments`, as
    buildcache.request_arguments gives them) would build, for the architectures of the candidate's process's
    ARCH_VARIABLE as it called (`arch_list`, "" where unset), as torch would. Its validity is the judge's to
    check (builds.py: `arch_list` must match ARCH_LIST_RE)."""

    KIND: ClassVar[str] = "build"
    REPLY: ClassVar[type] = Built
    arguments: Any = None
    arch_list: str = ""


@dataclass(frozen=True)
class Drawn:
    """A timed round's input set and roll, drawn by the judge."""

    set: int
    roll: int


@dataclass(frozen=True)
class RoundStart:
    """Timed round `i` (of `iters`) starts: the judge draws its input set and roll."""

    KIND: ClassVar[str] = "round"
    REPLY: ClassVar[type] = Drawn
    i: Any
    iters: Any = None


@dataclass(frozen=True)
class Decided:
    check: bool


@dataclass(frozen=True)
class RoundTimed:
    """The candidate's call of round `i` returned: the judge draws whether to check it."""

    KIND: ClassVar[str] = "timed"
    REPLY: ClassVar[type] = Decided
    i: Any


@dataclass(frozen=True)
class GoOn:
    """The judge has what it asked for; the worker goes on (a spot check's verdict stays with the judge)."""

    ok: bool = True


@dataclass(frozen=True)
class RoundOutputs:
    """The outputs of checked round `i`, shared as a seed's are."""

    KIND: ClassVar[str] = "spot_check"
    REPLY: ClassVar[type] = GoOn
    i: Any
    tensors: Any = None
    values: Any = None


# -- the profile driver (worker/profile_driver.py): a spec file in its scratch, an output file back ----------

PROFILE_SPEC = "spec.json"  # the driver's ProfileSpec, written by the judge in the driver's scratch (its cwd)
PROFILE_OUTPUT = "profile.json"  # the driver's ProfileOutput, written there by the driver: untrusted input
OWN_CODE = "(forward, outside PyTorch operators)"  # the CPU's profiler: time in the candidate's own functions


@dataclass(frozen=True)
class ProfileSpec:
    """One profile pass of a correct candidate (judge/profiler.py): `mode` "ncu" runs one forward call between
    cudaProfilerStart and cudaProfilerStop for ncu; "torch" runs it under torch.profiler."""

    mode: str
    device: str
    dtype: str
    task_source: str
    sizes: dict[str, Any]
    candidate_source: str
    seed: int
    config: JudgeConfig
    cache_dir: str
    judge_uid: int


@dataclass(frozen=True)
class ProfiledKernel:
    """One kernel of the profiler's list (on the CPU, an operator, or OWN_CODE), its launches added up."""

    name: str
    calls: int
    time_us: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or type(self.calls) is not int or type(self.time_us) not in (int, float) \
                or self.calls < 0 or not 0 <= self.time_us < math.inf:
            raise ValueError("a kernel is a name, a count of calls and a time")


@dataclass(frozen=True)
class ProfileOutput:
    """What a profile pass found: the shared objects of the candidate's extensions it loaded (believed only
    where they lie in the judge's build cache), and in mode "torch" the profiler's kernels."""

    binaries: list[str]
    kernels: list[ProfiledKernel] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.binaries, list) or not all(isinstance(b, str) for b in self.binaries):
            raise ValueError("binaries are a list of paths")


Command = Union[Setup, Survey, Probe, CompareSeed, CompareRound, PrepareTiming, TimeReference, PrepareBaselines, Vet,
                MeasureCeilings, Load, RunSeed, Release, SecondShape, Profile, Time, Exit]
Request = Union[BuildRequest, RoundStart, RoundTimed, RoundOutputs]
Reply = Union[Built, Drawn, Decided, GoOn]

ANSWERS: dict[type, type] = {
    Setup: SetupDone, Survey: Surveyed, Probe: Probed, CompareSeed: Compared, CompareRound: Compared, PrepareTiming: Done,
    TimeReference: Timed, PrepareBaselines: BaselinesPrepared, Vet: Vetted, MeasureCeilings: CeilingsMeasured,
    Load: Loaded, RunSeed: SeedRun, Release: Done, SecondShape: ShapeChecked, Profile: Profiled, Time: Timed, Exit: Done,
}
COMMANDS: dict[str, type] = {c.OP: c for c in ANSWERS}
REQUESTS: dict[str, type] = {r.KIND: r for r in (BuildRequest, RoundStart, RoundTimed, RoundOutputs)}
# Fields that hold a message of their own, and how each is read back.
_NESTED: dict[tuple[type, str], Callable[[Any], Any]] = {
    (Setup, "config"): JudgeConfig.from_dict,
    (Surveyed, "facts"): lambda d: Facts(**d),
    (Compared, "mismatches"): lambda ms: [Mismatch(**m) for m in ms],
    (Profiled, "kernels"): lambda ks: None if ks is None else [KernelTime(**k) for k in ks],
    (ProfileSpec, "config"): JudgeConfig.from_dict,
    (ProfileOutput, "kernels"): lambda ks: [ProfiledKernel(**k) for k in ks],
}


def encode(message: Any) -> dict[str, Any]:
    """The JSON object of a message: a command's with its op, an answer's with "ok", a request's with its kind."""
    body = asdict(message)
    if hasattr(message, "OP"):
        return {"op": message.OP, **body}
    if hasattr(message, "KIND"):
        return {"request": message.KIND, **body}
    if type(message) in ANSWERS.values() or isinstance(message, Failure):
        return {"ok": not isinstance(message, Failure), **body}
    return body  # a reply


def _decode(cls: type, data: dict[str, Any], tag: str) -> Any:
    """`cls` from a JSON object whose `tag` key named it: exactly its fields, the nested ones read back."""
    if not isinstance(data, dict):
        raise ProtocolError(f"a {cls.__name__} that is not an object")
    names = {f.name for f in fields(cls)}
    body = {k: v for k, v in data.items() if k != tag}
    unknown = set(body) - names
    if unknown:
        raise ProtocolError(f"a {cls.__name__} with unknown fields {sorted(unknown)[:5]}")
    try:
        for name in names & set(body):
            read = _NESTED.get((cls, name))
            if read is not None:
                body[name] = read(body[name])
        return cls(**body)
    except (TypeError, ValueError, AttributeError) as e:
        raise ProtocolError(f"not a {cls.__name__}: {e}") from None


def _decode_tagged(table: dict[str, type], data: dict[str, Any], tag: str, what: str) -> Any:
    """The `what` (a command, a request) of `table` that the `tag` key of a JSON object names."""
    cls = table.get(data.get(tag)) if isinstance(data, dict) else None
    if cls is None:
        raise ProtocolError(f"an unknown {what} {str(data.get(tag) if isinstance(data, dict) else data)[:40]!r}")
    return _decode(cls, data, tag)


def decode_command(data: dict[str, Any]) -> Command:
    """The command of a line the judge sent."""
    return _decode_tagged(COMMANDS, data, "op", "command")


def decode_answer(command: Command, data: dict[str, Any]) -> Any:
    """The answer to `command` of a line from its worker: its ANSWER, or a Failure."""
    ok = data.get("ok") if isinstance(data, dict) else None
    if ok is True:
        return _decode(ANSWERS[type(command)], data, "ok")
    if ok is False:
        return _decode(Failure, data, "ok")
    raise ProtocolError(f"an answer to {command.OP!r} that says neither ok nor not")


def decode_request(data: dict[str, Any]) -> Request:
    """The request of a line from a worker in the middle of a command."""
    return _decode_tagged(REQUESTS, data, "request", "request")


def decode_reply(request: Request, data: dict[str, Any]) -> Reply:
    """The judge's reply to `request`."""
    return _decode(type(request).REPLY, data, "")


def decode_profile_spec(data: dict[str, Any]) -> ProfileSpec:
    """The spec of a profile pass, as the driver reads it."""
    return _decode(ProfileSpec, data, "")


def decode_profile_output(data: dict[str, Any]) -> ProfileOutput:
    """What a profile pass's driver wrote back (the candidate's process could have written anything)."""
    return _decode(ProfileOutput, data, "")


__all__ = [
    "ARCH_LIST_RE", "ARCH_VARIABLE", "ANSWERS", "COMMANDS", "REQUESTS", "BaselinesPrepared", "BuildRequest", "Built",
    "CeilingsMeasured", "Command", "CompareRound", "CompareSeed", "Compared", "SharedOutputs", "Decided", "Done", "Drawn", "Exit",
    "Facts", "Failure", "GoOn", "KernelTime", "Load", "Loaded", "MeasureCeilings", "Mismatch", "OWN_CODE", "PROFILE_OUTPUT",
    "PROFILE_SPEC", "PrepareBaselines", "PrepareTiming", "Probe", "Probed", "Profile", "ProfileOutput", "ProfileSpec", "Profiled",
    "ProfiledKernel",
    "ProtocolError", "Release", "Reply", "Request", "RoundOutputs", "RoundStart", "RoundTimed", "RunSeed", "SecondShape",
    "SeedRun", "Setup", "SetupDone", "ShapeChecked", "Survey", "Surveyed", "Time", "TimeReference", "Timed", "Vet",
    "Vetted", "decode_answer", "decode_command", "decode_profile_output", "decode_profile_spec", "decode_reply", "decode_request",
    "encode",
]
