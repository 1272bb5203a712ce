"""The judge's rules, worded once: the prompts state them with the numbers of its configuration, the judge's
verdicts use the same words, and every count of speedups follows the rule on library calls; the static rules'
table is stated by the prompts, the rejections and docs/judge.md alike."""

from __future__ import annotations

import pytest

from kernelcraft.agents import LANGUAGES, Coder, render
from kernelcraft.judge import DeviceDescription, Flag, JudgeConfig, Status, TaskRules, Verdict, check_source
from kernelcraft.judge.protocol import KernelTime, Profile, Profiled, ProtocolError, decode_answer, encode
from kernelcraft.judge.rules import KERNELS_NAMED, OWN_KERNEL, CoverageRuling, credit_rule, reject_rule, rule_on_coverage
from kernelcraft.judge.static_rules import STATIC_RULES, StaticRule
from kernelcraft.report.metrics import TaskOutcome, summarize
from kernelcraft.tasks import resolve_task

from .conftest import ROOT
from .test_static import EXAMPLES, example

CONFIG = JudgeConfig().with_overrides({
    "seeds": 7, "atol": 3e-5, "rtol": 7e-4, "truth_factor": 3.5, "coverage_credit_below": 0.65, "coverage_reject_below": 0.05,
    "timing": {"spot_checks": 4, "min_noise": 0.025, "cpu_flush_bytes": 0},
})


def _system(config: JudgeConfig, device: str = "cuda") -> str:
    task = resolve_task("softmax_rows")
    coder = Coder(None, "cuda", DeviceDescription(device, "a device"))
    return coder.opening(task, TaskRules.of(config, task, device))[0].content


def test_the_prompts_state_the_judges_rules_with_the_numbers_of_its_configuration() -> None:
    system = _system(CONFIG)
    for said in ("7 secret input seeds", "atol=3e-05", "rtol=0.0007", "computed in float64", "at most 3.5 times the float32",
                 "about 4 timed calls, drawn at random", "at least 2.5% either way", "fresh inputs every call", "the cache flushed",
                 "at least 65% of the forward's time", "take 5% of the forward's time or less"):
        assert said in system, said
    default = _system(JudgeConfig())
    assert "at least 50% of the forward's time" in default and "do none of the forward's work" in default
    assert "at most 2 times" in default and "atol=0.0001" in default
    # without the float64 truth, the reference's output; on a CPU whose cache the judge leaves be, no flush
    plain = _system(JudgeConfig(truth=False).with_overrides({"timing": {"cpu_flush_bytes": 0}}), device="cpu")
    assert "compared with the reference's output at float32" in plain and "float64" not in plain and "flushed" not in plain
    rules = TaskRules.of(CONFIG, resolve_task("softmax_rows"), "cuda")
    planner = render("planner_system", language=LANGUAGES["cuda"], rules=rules)
    assert "atol=3e-05, rtol=0.0007" in planner and "within 3.5 times" in planner and credit_rule(0.65) in planner


def test_the_judges_messages_and_the_prompt_share_the_rules_words() -> None:
    system = _system(CONFIG)
    flagged = rule_on_coverage(0.3, 4, [], CONFIG)
    assert flagged.reject is None and flagged.flag == f"coverage 30%: {credit_rule(0.65)}"
    assert credit_rule(0.65) in system
    gemm = KernelTime("nvjet_sm90_gemm", 96.0, 0.96, False, "launched inside aten::mm")
    for ruling in (rule_on_coverage(0.04, 4, [gemm], CONFIG), rule_on_coverage(0.9, 0, [], CONFIG)):
        assert ruling.flag is None and reject_rule(0.05) in ruling.reject and OWN_KERNEL in ruling.reject
    assert reject_rule(0.05) in system and OWN_KERNEL in system


def test_the_rule_on_coverage_rejects_flags_or_credits() -> None:
    cfg = JudgeConfig()  # credit from 50%, reject at 0%
    assert "nvjet 100% (not own: launched inside aten::mm)" in rule_on_coverage(
        0.0, 3, [KernelTime("nvjet", 9.0, 1.0, False, "launched inside aten::mm")], cfg).reject
    assert "PyTorch did the work" in rule_on_coverage(0.7, 0, [], cfg).reject  # none of its own kernels ran
    assert rule_on_coverage(0.01, 3, [], cfg).flag and rule_on_coverage(0.49, 3, [], cfg).flag
    assert rule_on_coverage(0.5, 3, [], cfg) == rule_on_coverage(1.0, 3, [], cfg) == CoverageRuling()


# As the H200 profiled level2/22's first turn (lost-turns/README.md): its own GEMM in an anonymous namespace, which the
# judge did not recognize, and its small second kernel.
ANONYMOUS_GEMM = ("(anonymous namespace)::gemm_tf32_clamp_lse_kernel(float const*, float const*, float const*, float2*, "
                  "int, int, int, float)")
RAN = [KernelTime(ANONYMOUS_GEMM, 610.0, 0.61, False, "not compiled from its source"),
       KernelTime("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1> >"
                  "(int, at::native::FillFunctor<float>, std::array<char*, 1>)", 200.0, 0.2, False, "launched inside aten::zero_"),
       KernelTime("(anonymous namespace)::lse_merge_mish_kernel(float2 const*, float*, int, int)", 150.0, 0.15, True),
       KernelTime("Memset (Device)", 40.0, 0.04, False, "not compiled from its source")]


def test_a_coverage_reject_names_the_kernels_that_ran_and_whose_each_is() -> None:
    """Issue 45: told only "coverage 0%: the time went to (anonymous namespace)::gemm...", a model can but guess
    that the judge did not count its own kernel; the message says which kernels ran and which the judge counted."""
    cfg = JudgeConfig().with_overrides({"coverage_reject_below": 0.2})
    reject = rule_on_coverage(0.15, 2, RAN, cfg).reject
    assert reject is not None and reject.startswith(
        "coverage 15%; kernels that ran: (anonymous namespace)::gemm_tf32_clamp_lse_kernel 61% (not own: not compiled "
        "from its source), at::native::vectorized_elementwise_kernel<4, at::native::FillFuncto... 20% "
        "(not own: launched inside aten::zero_), (anonymous namespace)::lse_merge_mish_kernel 15% (own); "), reject
    assert "Memset" not in reject and KERNELS_NAMED == 3  # the largest few only
    none_ran = rule_on_coverage(0.0, 0, RAN[:1], cfg).reject
    assert none_ran is not None and "fallback); kernels that ran: (anonymous namespace)::gemm" in none_ran
    # a low-coverage flag names them too; with nothing profiled on a device (the CPU), the message is as before
    flag = rule_on_coverage(0.3, 2, RAN[2:], cfg).flag
    assert flag == (f"coverage 30% (kernels that ran: (anonymous namespace)::lse_merge_mish_kernel 15% (own), Memset (Device) "
                    f"4% (not own: not compiled from its source)): {credit_rule(0.5)}")
    assert rule_on_coverage(0.0, 2, [], cfg).reject.startswith(f"coverage 0%; {reject_rule(0.2)}")


def test_the_kernels_that_ran_travel_typed_from_the_worker() -> None:
    """The worker's answer to a profile command carries each kernel as a KernelTime; a malformed one is a
    ProtocolError (a forged answer), not a message the judge formats."""
    answer = Profiled(custom_launches=2, calls={"ext:forward": 2}, coverage=0.15, kernels=RAN)
    assert decode_answer(Profile(0), encode(answer)) == answer
    assert decode_answer(Profile(0), encode(Profiled(1, {}, 0.5))).kernels is None  # the CPU's
    forged = {**encode(answer), "kernels": [{"name": "k", "us": 1.0, "share": 1.0, "own": True, "whose": "mine"}]}
    with pytest.raises(ProtocolError):
        decode_answer(Profile(0), forged)


def _correct(speedup: float, significant: bool = True, low_coverage: bool = False) -> Verdict:
    flags = [Flag("low_coverage", "coverage 30%")] if low_coverage else []
    return Verdict(status=Status.CORRECT, task="t", device="cuda", speedup=speedup, significant=significant, flags=flags)


@pytest.mark.parametrize(("verdict", "counted"), [
    (_correct(2.0), 2.0),
    (_correct(1.03, significant=False), 1.0),
    (_correct(2.0, low_coverage=True), 1.0),  # a win earns no credit
    (_correct(0.7, low_coverage=True), 0.7),  # a slowdown still counts
    (_correct(0.98, significant=False, low_coverage=True), 1.0),
])
def test_the_effective_speedup_follows_the_rule(verdict: Verdict, counted: float) -> None:
    assert verdict.effective_speedup == pytest.approx(counted)
    assert Verdict.from_dict(verdict.to_dict()).effective_speedup == pytest.approx(counted)


def test_fast_p_counts_a_low_coverage_win_as_correct_but_not_fast() -> None:
    verdicts = [_correct(3.0), _correct(3.0, low_coverage=True)]
    outcomes = [TaskOutcome.of_verdict(f"t{i}", 1, v, {}) for i, v in enumerate(verdicts)]
    fast_p = summarize("level 1", outcomes).fast_p
    assert (fast_p[0.0], fast_p[0.8], fast_p[1.0], fast_p[2.0]) == (1.0, 1.0, 0.5, 0.5)


def _rendered_items(rule: StaticRule, native: bool, cuda: bool = True) -> list[str]:
    return [*rule.imports, *rule.names, *rule.attributes, *rule.calls, *rule.constructs, *(rule.native if native else ()),
            rule.reason, rule.allowed, rule.cuda_allows if cuda else ""]


def test_the_prompts_state_every_static_rule_the_checker_applies_in_the_words_of_its_rejections() -> None:
    """judge/static_rules.py's table, once: in the coder's and planner's prompts, and in every rejection under it."""
    rules = TaskRules.of(JudgeConfig(), resolve_task("softmax_rows"), "cuda")
    assert rules.static_rules == STATIC_RULES
    coder = _system(JudgeConfig())
    planner = render("planner_system", language=LANGUAGES["cuda"], rules=rules)
    triton = Coder(None, "triton", DeviceDescription("cuda", "a device")).opening(resolve_task("softmax_rows"), rules)[0].content
    for rule in STATIC_RULES:
        for words in filter(None, _rendered_items(rule, native=True)):
            assert words in coder and words in planner, (rule.key, words)
        for words in filter(None, _rendered_items(rule, native=False)):
            assert words in triton, (rule.key, words)
    assert "std::thread" not in triton  # Triton kernels are no native source
    cpu_task = resolve_task("softmax_rows")
    cpu_rules = TaskRules.of(JudgeConfig(), cpu_task, "cpu")
    cpp = Coder(None, "cpp", DeviceDescription("cpu", "x86_64")).opening(cpu_task, cpu_rules)[0].content
    for rule in STATIC_RULES:
        for words in filter(None, _rendered_items(rule, native=True, cuda=False)):
            assert (words in cpp) == ("cpu" in rule.devices), (rule.key, words)  # no streams on a CPU
    assert "CUDA" not in cpp and "GPU" not in cpp
    for rule, field, item in EXAMPLES:
        report = check_source("import torch\nimport torch.nn as nn\n" + example(field, item) + "\nclass ModelNew(nn.Module): pass\n")
        said = report.message() if not rule.flag else report.flags[0][1]
        assert f": {rule.reason}" in said, (rule.key, said)
    assert "try/except" in coder and reject_rule(0.0) in coder  # no rule, and what stops a fallback instead


def test_without_static_checks_the_prompts_state_none() -> None:
    off = JudgeConfig(static_checks=False)
    assert TaskRules.of(off, resolve_task("softmax_rows"), "cuda").static_rules == ()
    assert all(rule.reason not in _system(off) for rule in STATIC_RULES)


def _section(text: str, begin: str, end: str) -> str:
    assert begin in text and end in text, f"the markers {begin!r} and {end!r}"
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def test_docs_judge_states_the_static_rules_as_the_prompt_does() -> None:
    rules = TaskRules.of(JudgeConfig(), resolve_task("softmax_rows"), "cuda")
    rendered = render("static_rules", language=LANGUAGES["cuda"], rules=rules)
    stated = _section((ROOT / "docs" / "judge.md").read_text(), "<!-- static rules as the prompts state them: begin -->",
                      "<!-- static rules as the prompts state them: end -->")
    assert stated == rendered, f"docs/judge.md's static rules as the prompts state them, rendered from the table now:\n{rendered}"


def docs_table() -> str:
    """docs/judge.md's table of the static rules, from the table."""
    def items(rule: StaticRule) -> str:
        said = {"imports": "imports of ", "attributes": "attributes ", "native": "in native source "}
        parts = [said.get(field, "") + ", ".join(i if field == "constructs" else f"`{i}`" for i in getattr(rule, field))
                 for field in ("imports", "names", "attributes", "calls", "constructs", "native") if getattr(rule, field)]
        allowed = "; ".join(filter(None, (rule.allowed, f"on a GPU, {rule.cuda_allows}" if rule.cuda_allows else "")))
        return "; ".join(parts) + (f" (allowed: {allowed})" if allowed else "") + \
            ("" if rule.devices == ("cpu", "cuda") else f" (stated for {' and '.join(rule.devices)} only)")
    rows = [f"| `{r.key}` | {items(r)} | {r.reason}{f' (flag `{r.flag}`)' if r.flag else ''} | "
            f"{', '.join(map(str, r.exploits))} | {r.runtime} |" for r in STATIC_RULES]
    return "\n".join(["| rule | what it rejects | why (the prompt's words) | stops class | at run time, also stopped by |",
                      "|---|---|---|---|---|", *rows])


def test_docs_judge_lists_every_static_rule_with_its_classes_and_runtime_check() -> None:
    docs = _section((ROOT / "docs" / "judge.md").read_text(), "<!-- static rules: begin -->", "<!-- static rules: end -->")
    assert docs == docs_table(), f"docs/judge.md's static rules, from the table now:\n{docs_table()}"
