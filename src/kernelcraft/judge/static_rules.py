"""The judge's static rules, one table: what each rule rejects (or flags), its reason in the words the model is
told, the exploit classes it stops (docs/judge.md) and the runtime check that backs it.

`static.check_source` applies exactly this table; the coder's and planner's prompts render it (through
`rules.TaskRules`, templates/static_rules.j2), and so does docs/judge.md ("The rules a candidate must follow"); its
"Static rules" lists it with its classes and runtime checks (tests/test_rules.py holds all three to the table). A
rejection reads "line N: WHAT: REASON", in the words of the prompt.

A rule names what it stops in up to six ways: imports (a module and everything under it), builtin names,
attributes, PyTorch's dotted names (a name and everything under it, however imported), constructs of the
Python file, and patterns in native (C++/CUDA) source strings. One module, `os`, is allowed in part: the
paths and the environment a build needs (`OS_*`); the rest of it is a construct of its own (OS_BEYOND).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .protocol import ARCH_VARIABLE

# Constructs the checker knows by these words.
ASSIGN_TO_MODULE = "assigning to a module's attribute"
RELATIVE_IMPORT = "relative imports"
INHERIT_MODEL = "ModelNew inheriting from Model"
SUPER_FORWARD = "super().forward"

# The part of `os` a candidate may use: a build's paths, the environment read, and the architectures of a
# `load_inline` build set around it (the wgmma kernels need "9.0a"; torch reads the variable as it builds, and the
# judge's build request carries it: protocol.BuildRequest).
OS_MODULE = "os"
OS_PATH_FUNCTIONS = frozenset({"abspath", "basename", "dirname", "exists", "expanduser", "isdir", "isfile", "join",
                               "normpath", "realpath", "split", "splitext"})
OS_FUNCTIONS = frozenset({"getenv"})
ENV_READS = frozenset({"get", "items", "keys", "values", "copy"})  # os.environ's methods that read
ENV_WRITES = frozenset({"pop", "setdefault"})  # and that write, allowed for ARCH_VARIABLE only
OS_BEYOND = "os beyond os.path's path functions, os.getenv and reading os.environ"
OS_ARCH = f"setting or restoring os.environ[\"{ARCH_VARIABLE}\"] around a load_inline build, e.g. \"9.0a\" for wgmma"

_SANDBOX = ("a scrubbed environment (`sandbox.scrubbed_env`), Landlock (writes only to scratch; none of the judge's files "
            "readable), no network, rlimits (the workers' user's process cap), the process group killed on timeout, and a "
            "worker that exits without an answer is runtime_error (`worker/confine.py`, `isolation.py`, "
            "`worker.state.apply_limits`, `worker_process.py`)")

# Native source is checked in string constants at least this long (shorter ones are names, flags, formats).
NATIVE_MIN_CHARS = 20


@dataclass(frozen=True)
class StaticRule:
    """One static rule: what it rejects (or, with `flag`, flags), why, and what else stops the exploit."""

    key: str
    reason: str  # one line, in the words of the prompt and of every rejection under this rule
    exploits: tuple[int, ...]  # docs/judge.md's exploit classes it stops
    runtime: str  # the runtime check that also stops them (docs/judge.md)
    imports: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    constructs: tuple[str, ...] = ()
    native: tuple[str, ...] = ()  # "name(" is a call of name; any other text is matched as written, spaces optional
    allowed: str = ""  # what the rule lets through, where that needs saying
    cuda_allows: str = ""  # what it lets through for a CUDA build, said where the device is a GPU
    flag: str | None = None  # a flag code: the rule flags, it does not reject
    devices: tuple[str, ...] = ("cpu", "cuda")  # where it is stated (the checker applies every rule everywhere)

    @property
    def native_pattern(self) -> re.Pattern[str] | None:
        """The regular expression of `native`, or None."""
        if not self.native:
            return None
        parts = [rf"\b{re.escape(n[:-1])}\s*\(" if n.endswith("(") else re.escape(n).replace(r"\ ", r"\s*")
                 for n in self.native]
        return re.compile("|".join(parts))


STATIC_RULES: tuple[StaticRule, ...] = (
    StaticRule(
        "concurrency", "threads, processes and asynchronous work of your own run outside the timed call",
        exploits=(1, 2), runtime="the clock stops after a whole-device synchronisation (`worker.timing.Clock.time_call`); "
        "a Python thread alive after a call is hack_detected, and native threads are held to one OpenMP pool on the CPU "
        "and flagged `native_threads` on CUDA (`worker.guards.ThreadWatch`, `CandidateOps.check_threads`); timed calls "
        "spot-checked",
        imports=("threading", "_thread", "multiprocessing", "concurrent", "asyncio"),
        calls=("torch.jit.fork", "torch.jit._fork", "torch.futures", "torch.multiprocessing", "torch.distributed",
               "torch.utils.data"),
        native=("std::thread", "#include <thread>", "pthread_create", "std::async", "std::jthread", "std::execution"),
        allowed="OpenMP `#pragma omp` and `at::parallel_for`, which join before forward returns"),
    StaticRule(
        "system", "processes, signals, sockets, system calls and files are out of bounds",
        exploits=(15, 17, 28, 29), runtime=_SANDBOX,
        imports=("subprocess", "signal", "socket", "ctypes", "cffi", "io", "pathlib", "glob", "shutil", "tempfile"),
        names=("open", "input", "breakpoint"),
        native=("fork(", "vfork(", "system(", "popen(", "execv(", "execvp(", "execve(", "execl(", "execlp(", "dlopen(",
                "syscall(", "kill(")),
    StaticRule(
        "os", "os serves a build's paths and architectures only; the rest of it starts processes, sends signals and "
        "opens files", exploits=(15, 17, 28, 29), runtime=_SANDBOX, constructs=(OS_BEYOND,), cuda_allows=OS_ARCH),
    StaticRule(
        "introspection", "introspection reaches the judge's state in your process",
        exploits=(4, 15, 19, 23), runtime="nothing that decides a verdict is in the candidate's process (seeds, rounds, "
        "spot checks and comparisons are the parent's and the trusted worker's: `rounds.py`, `worker/exchange.py`); the "
        "guard after import, construction and every call (`worker.guards.Guard`)",
        imports=("sys", "gc", "inspect", "importlib", "builtins", "pickle", "marshal"),
        names=("globals", "locals", "vars"),
        attributes=("__dict__", "__globals__", "__code__", "__builtins__", "__subclasses__", "__class__", "__bases__",
                    "__mro__", "__closure__", "_getframe", "f_globals", "f_locals", "f_back")),
    StaticRule(
        "patching", "the modules, functions and operators the reference uses may not be changed",
        exploits=(4,), runtime="the guard compares function identity, the mode stacks and precision flags after import, "
        "construction and every call (`worker.guards.Guard`); the reference timed next to the candidate against its time "
        "alone and a control (`Audit.run`, `slowdown.py`)",
        names=("setattr", "delattr"), calls=("torch.library", "torch._C", "torch.overrides"),
        constructs=(ASSIGN_TO_MODULE,)),
    StaticRule(
        "generated", "code comes from the candidate's one file, not made or imported at run time",
        exploits=(4, 15), runtime="the guard and the sandbox, as for what the code would do",
        names=("exec", "eval", "compile", "__import__"), constructs=(RELATIVE_IMPORT,)),
    StaticRule(
        "precision", "the judge pins matmul precision and TF32",
        exploits=(11,), runtime="precision flags pinned and checked after every call (`worker.guards.pin_precision`, "
        "`worker.guards.precision_flags`); correctness against a float64 truth",
        calls=("torch.set_float32_matmul_precision", "torch.backends.cuda.matmul.allow_tf32")),
    StaticRule(
        "compiler", "PyTorch's compiler would write the kernels, not you",
        exploits=(10,), runtime="coverage: only kernels compiled from the candidate's source and launched by its code are "
        "its own (`worker/coverage.py`, `rules.rule_on_coverage`)",
        calls=("torch.compile", "torch._dynamo", "torch._inductor")),
    StaticRule(
        "reference", "it falls back to the reference",
        exploits=(9,), runtime="a forward in which none of the candidate's own kernels runs is hack_detected "
        "(`worker.launches.LaunchCounter`, `rules.rule_on_coverage`)",
        constructs=(INHERIT_MODEL, SUPER_FORWARD)),
    StaticRule(
        "chance", "forward's work must not depend on the clock or on chance",
        exploits=(14, 18, 19), runtime="timed calls spot-checked at random, decided in the parent after each returns "
        "(`rounds.TimedRounds`); every call pinned as timed calls are (`worker.timing.pinned`)",
        imports=("time", "random")),
    StaticRule(
        "streams", "work on another stream is timed anyway: the clock stops after a whole-device synchronisation",
        exploits=(1,), runtime="the clock stops after a whole-device synchronisation (`worker.timing.Clock.time_call`)",
        calls=("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream",
               "torch.Stream"),
        native=("cudaStreamCreate", "getStreamFromPool", "cudaStreamNonBlocking"), flag="side_stream", devices=("cuda",)),
)

RULES: dict[str, StaticRule] = {r.key: r for r in STATIC_RULES}


def _index(field: str) -> dict[str, StaticRule]:
    return {item: r for r in STATIC_RULES for item in getattr(r, field)}


BY_IMPORT = _index("imports")
BY_NAME = _index("names")
BY_ATTRIBUTE = _index("attributes")
BY_CALL = _index("calls")
BY_CONSTRUCT = _index("constructs")


def call_rule(dotted: str) -> tuple[str, StaticRule] | None:
    """The PyTorch name of a rule that `dotted` is or lies under, with its rule; None where no rule names it."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        rule = BY_CALL.get(".".join(parts[:n]))
        if rule is not None:
            return ".".join(parts[:n]), rule
    return None


def native_rules() -> list[tuple[re.Pattern[str], StaticRule]]:
    """Each rule with native patterns, and its expression."""
    return [(p, r) for r in STATIC_RULES if (p := r.native_pattern) is not None]


__all__ = ["ARCH_VARIABLE", "ASSIGN_TO_MODULE", "BY_ATTRIBUTE", "BY_CALL", "BY_CONSTRUCT", "BY_IMPORT", "BY_NAME",
           "ENV_READS", "ENV_WRITES", "INHERIT_MODEL", "NATIVE_MIN_CHARS", "OS_ARCH", "OS_BEYOND", "OS_FUNCTIONS",
           "OS_MODULE", "OS_PATH_FUNCTIONS", "RELATIVE_IMPORT", "RULES", "STATIC_RULES", "SUPER_FORWARD", "StaticRule",
           "call_rule", "native_rules"]
