"""Search strategies side by side (`kernelcraft bench`): one task set under several arms (a strategy with its options,
skills on or off), every arm with the same budget per task, through any model backend (batch replies included: one
request file per round across all arms), resumable from a copy of its workspace anywhere; per arm and level, correct
tasks, fast_p and geomean against eager (strict), eager at PyTorch's defaults and torch.compile, fast_1 per judge
call, tokens, dollars and wall time, on a page with a plot (docs/bench.md)."""

from .arms import Arm, ArmError, check_arms, parse_arm
from .page import write_page
from .results import ALL, COMPILED, DEFAULTS, KINDS, ArmRow, ArmStatus, BenchResults, Curve, gather
from .runner import ArmRun, BenchRun, Watch, restart_arm, run_bench, start_bench
from .spec import ARMS_DIR, RESULTS_DIR, BenchError, BenchSpec, BenchState, load_spec, load_state

__all__ = [
    "ALL", "ARMS_DIR", "COMPILED", "DEFAULTS", "KINDS", "RESULTS_DIR", "Arm", "ArmError", "ArmRow", "ArmRun", "ArmStatus",
    "BenchError", "BenchResults", "BenchRun", "BenchSpec", "BenchState", "Curve", "Watch", "check_arms", "gather",
    "load_spec", "load_state", "parse_arm", "restart_arm", "run_bench", "start_bench", "write_page",
]
