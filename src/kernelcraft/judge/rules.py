"""The rules a candidate is judged by, worded once and numbered from the judge's configuration.

The rule on library calls lives here, logic and words: the judge applies it (`rule_on_coverage`),
its verdicts say it in these words, `Verdict.effective_speedup` counts what it allows, and the coder's
and planner's prompts (agents/templates) render it, with the other rules a candidate must meet, from a
`TaskRules` made from the same `JudgeConfig`. So the model is told the rule it is judged by. The static rules
are static_rules.py's table, carried here for the prompts (templates/static_rules.j2).
docs/judge.md: "Library calls and coverage".
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tasks import Task
from .config import JudgeConfig
from .protocol import KernelTime
from .static_rules import STATIC_RULES, StaticRule
from .worker.cxx_names import kernel_label

# The flag of a correct candidate whose speedup earns no credit under the rule on library calls.
LOW_COVERAGE = "low_coverage"

OWN_KERNEL = ("a kernel is the candidate's own when the candidate's source compiles it (a `__global__` function it defines, "
              "a template it instantiates, CUTLASS's and CuTe's included, or a `@triton.jit` function) and the candidate's "
              "own code launches it, not a PyTorch operator")

KERNELS_NAMED = 3  # the kernels a coverage message names, largest first
# A named kernel's name, without its return type and parameters, is cut to this: its template arguments tell the
# candidate's instance of a template from a library's.
_LABEL_CHARS = 70

# How summaries count a speedup (Verdict.effective_speedup), in the words the reports print.
SPEEDUP_CREDIT = ("a speedup inside the reference's noise band counts as 1.00x, and a correct candidate flagged low_coverage "
                  "(the rule on library calls) counts as 1.00x at most")


def _percent(share: float) -> str:
    """A threshold as a percentage, exactly: 0.5 -> '50%', 0.125 -> '12.5%'."""
    return f"{100 * share:g}%"


def credit_rule(credit_below: float) -> str:
    """The rule on library calls, with the judge's `coverage_credit_below`."""
    return (f"library calls (PyTorch operators, cuBLAS, cuDNN) may do part of the work, but a speedup earns credit only when "
            f"at least {_percent(credit_below)} of the forward's time is spent in the candidate's own kernels; below that the "
            "candidate is still correct but counts as no faster than the reference (its speedup capped at 1.00x)")


def reject_rule(reject_below: float) -> str:
    """When the rule on library calls rejects a candidate, with the judge's `coverage_reject_below`."""
    share = "do none of the forward's work (none of them runs, or they take 0% of its time)" if reject_below == 0 else (
        f"take {_percent(reject_below)} of the forward's time or less (or none of them runs)")
    return f"a candidate whose own kernels {share} is rejected (hack_detected)"


@dataclass(frozen=True)
class CoverageRuling:
    """What the rule on library calls makes of a correct candidate's profiled call: a reject (its message)
    or a low_coverage flag (its message), or neither (the speedup counts in full)."""

    reject: str | None = None
    flag: str | None = None


def kernels_that_ran(kernels: list[KernelTime]) -> str:
    """The largest kernels of a profiled call and whose each is, as a coverage message names them:
    'kernels that ran: k 62% (own), nvjet_sm90_... 38% (not own: launched inside aten::mm)'; "" for none."""
    named = [f"{kernel_label(k.name, _LABEL_CHARS)} {k.share:.0%} ({'own' if k.own else 'not own: ' + k.why_not})"
             for k in kernels[:KERNELS_NAMED]]
    return "kernels that ran: " + ", ".join(named) if named else ""


def rule_on_coverage(coverage: float, own_launches: int, kernels: list[KernelTime], config: JudgeConfig) -> CoverageRuling:
    """The rule on library calls applied to a candidate whose own kernels launched `own_launches` times (calls
    of its wrapped functions, and each run of its kernels a CUDA graph replayed) and took `coverage` of the
    forward's time; `kernels` are the call's largest kernels (largest first), which its messages name with
    whose each is, so that a model or a person sees which kernel the judge did not count as the candidate's."""
    ran = kernels_that_ran(kernels)
    if own_launches == 0:
        found = "none of the candidate's own kernels ran during forward: PyTorch did the work (a decoy kernel or a fallback)"
    elif coverage <= config.coverage_reject_below:
        found = f"coverage {coverage:.0%}"
    elif coverage < config.coverage_credit_below:
        return CoverageRuling(flag=f"coverage {coverage:.0%}" + (f" ({ran})" if ran else "") +
                              f": {credit_rule(config.coverage_credit_below)}")
    else:
        return CoverageRuling()
    return CoverageRuling(reject=found + (f"; {ran}" if ran else "") + f"; {reject_rule(config.coverage_reject_below)}; "
                          f"{OWN_KERNEL}")


@dataclass(frozen=True)
class TaskRules:
    """What the judge, as configured, asks of a candidate for one task on one kind of device: the numbers
    and words the coder's and planner's prompts state."""

    dtype: str
    atol: float
    rtol: float
    seeds: int
    truth: bool  # compared with the reference computed in float64, where that applies
    truth_factor: float
    fresh_inputs: bool
    flushes_cache: bool
    spot_checks: int
    min_noise: float
    coverage_credit_below: float
    coverage_reject_below: float
    device: str  # "cpu" or "cuda"
    static_rules: tuple[StaticRule, ...]  # the static checker's table as stated on the device; none where the checks are off

    @classmethod
    def of(cls, config: JudgeConfig, task: Task, device: str) -> "TaskRules":
        """The rules `config` sets for `task` on `device` ("cpu" or "cuda")."""
        atol, rtol = config.tolerance(task.meta.dtype, task.meta.atol, task.meta.rtol)
        timing = config.timing
        flush = timing.flush_bytes if device == "cuda" else timing.cpu_flush_bytes
        return cls(dtype=task.meta.dtype, atol=atol, rtol=rtol, seeds=config.seeds, truth=config.truth,
                   truth_factor=config.truth_factor, fresh_inputs=timing.fresh_inputs, flushes_cache=flush > 0,
                   spot_checks=timing.spot_checks, min_noise=timing.min_noise,
                   coverage_credit_below=config.coverage_credit_below, coverage_reject_below=config.coverage_reject_below,
                   device=device,
                   static_rules=tuple(r for r in STATIC_RULES if device in r.devices) if config.static_checks else ())

    @property
    def credit_rule(self) -> str:
        """The rule on library calls, in the judge's words."""
        return credit_rule(self.coverage_credit_below)

    @property
    def reject_rule(self) -> str:
        """When that rule rejects, in the judge's words."""
        return reject_rule(self.coverage_reject_below)

    @property
    def own_kernel(self) -> str:
        """What makes a kernel the candidate's own, in the judge's words."""
        return OWN_KERNEL


__all__ = ["KERNELS_NAMED", "LOW_COVERAGE", "OWN_KERNEL", "SPEEDUP_CREDIT", "CoverageRuling", "TaskRules", "credit_rule",
           "kernels_that_ran", "reject_rule", "rule_on_coverage"]
