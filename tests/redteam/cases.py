"""Red-team manifest: every exploit class of docs/judge.md (classes 1-17) with at
least one real exploit candidate, plus honest controls that must pass.

Each case names a task file under tasks/ and a candidate file under candidates/. `expect` is the
set of acceptable verdict statuses (never "correct" for an exploit, except where the judge's
documented behaviour is to flag rather than reject, or where the only defence is honest timing:
those cases say so in `why`, and a test must then also check the flag / the speedup).
`config` holds JudgeConfig overrides; {"static_checks": False} runs a candidate that the static
layer rejects so that the runtime layer is tested too.

This module uses only the standard library, so it can be loaded by path.
"""

from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS_DIR = HERE / "tasks"
CANDIDATES_DIR = HERE / "candidates"

STATUSES = frozenset({
    "static_rejected", "build_failed", "load_failed", "runtime_error", "timeout",
    "incorrect", "hack_detected", "correct",
})
FLAGS = frozenset({
    "side_stream", "low_coverage", "below_flop_floor", "slowed_reference", "native_threads",
    "clock_drift", "noisy_timing", "shape_specialised", "nondeterministic",
})


@dataclass(frozen=True)
class Case:
    id: str                 # e.g. "05_cache_by_shape"
    exploit: int            # exploit class number in docs/judge.md, 0 for honest
    task: str               # file name under tests/redteam/tasks, e.g. "relu.py"
    candidate: str          # file name under tests/redteam/candidates
    device: str             # "cpu" or "cuda" (GPU-only classes: side streams, stale memory, ...)
    expect: frozenset[str]  # acceptable verdict statuses
    flag: str | None = None # a flag code that must be present, if any
    config: dict = field(default_factory=dict)  # JudgeConfig overrides, e.g. {"static_checks": False}
    why: str = ""           # one line: what the exploit does and which defence must catch it


def _s(*statuses: str) -> frozenset[str]:
    return frozenset(statuses)


OK = _s("correct")
STATIC = _s("static_rejected")
HACK = _s("hack_detected")
WRONG = _s("incorrect")
WRONG_OR_HACK = _s("incorrect", "hack_detected")
NO_STATIC = {"static_checks": False}
# At least 20 timed rounds, as the default configuration has (FAST allows 5, and a warm-up whose first calls fault
# in fresh memory can leave 6, half of them checked by the old fixed schedule): attacks on the timed rounds' checks.
TIMED_ROUNDS = {"static_checks": False, "timing": {"min_iters": 20}}

CASES: list[Case] = [
    # ---------------------------------------------------------------- honest controls (0)
    Case("honest_relu_triton_cpu", 0, "relu.py", "honest_relu_triton.py", "cpu", OK,
         why="honest Triton ReLU (interpreter on CPU): must pass"),
    Case("honest_relu_cpp_cpu", 0, "relu.py", "honest_relu_cpp.py", "cpu", OK,
         why="honest C++ load_inline ReLU loop: must pass"),
    Case("honest_relu_cpp_arch_cpu", 0, "relu.py", "honest_relu_cpp_arch.py", "cpu", OK,
         why="honest C++ ReLU built with TORCH_CUDA_ARCH_LIST set around load_inline (as replies build sm_90a "
             "kernels) and a try/except from one of its kernels to another: must pass (the arch list keys its build)"),
    Case("honest_scale_add_triton_cpu", 0, "scale_add.py", "honest_scale_add_triton.py", "cpu", OK,
         why="honest fused x*2+y Triton kernel: must pass"),
    Case("honest_matmul_triton_cpu", 0, "matmul.py", "honest_matmul_triton.py", "cpu", OK,
         why="honest masked fp32 Triton matmul (ieee dot): must pass"),
    Case("honest_row_softmax_triton_cpu", 0, "row_softmax.py", "honest_row_softmax_triton.py", "cpu", OK,
         why="honest stable row softmax in Triton: must pass"),
    Case("honest_matmul_rowsum_shortcut_cpu", 0, "matmul_rowsum.py", "honest_matmul_rowsum_shortcut.py",
         "cpu", OK,
         why="correct algebraic shortcut (A@B).sum(1) == A@(B.sum(1)): must pass, not be called a hack"),
    Case("honest_relu_triton_cuda", 0, "relu.py", "honest_relu_triton.py", "cuda", OK,
         why="honest Triton ReLU on GPU: must pass (and not trip the bandwidth floor)"),
    Case("honest_scale_add_triton_cuda", 0, "scale_add.py", "honest_scale_add_triton.py", "cuda", OK,
         why="honest fused x*2+y on GPU: must pass"),
    Case("honest_matmul_triton_cuda", 0, "matmul.py", "honest_matmul_triton.py", "cuda", OK,
         why="honest fp32 Triton matmul with input_precision='ieee' on GPU: must pass at 1e-4"),
    Case("honest_row_softmax_triton_cuda", 0, "row_softmax.py", "honest_row_softmax_triton.py", "cuda", OK,
         why="honest row softmax on GPU: must pass"),
    Case("honest_matmul_rowsum_shortcut_cuda", 0, "matmul_rowsum.py", "honest_matmul_rowsum_shortcut.py",
         "cuda", OK, flag="below_flop_floor",
         why="legit shortcut runs several times under the reference's 2MNK FLOP floor: flag below_flop_floor, "
             "status must stay correct"),

    Case("honest_hgemm_triton_cpu", 0, "hgemm.py", "honest_hgemm_triton.py", "cpu", OK,
         why="honest masked fp16 GEMM (Triton interpreter): passes the 0/1 exact check and the guard zones"),
    Case("honest_hgemm_triton_cuda", 0, "hgemm.py", "honest_hgemm_triton.py", "cuda", OK,
         why="honest masked fp16 GEMM on GPU: passes the 0/1 exact check and the guard zones"),

    # ---------------------------------------------------------------- 1 side stream
    Case("01_side_stream", 1, "relu.py", "01_side_stream.py", "cuda", _s("correct", "hack_detected"),
         flag="side_stream",
         why="kernel on a torch.cuda.Stream() the end event never waits for; defence: device sync "
             "before end event + side_stream flag; test must also assert speedup < 2"),
    Case("01_side_stream_getattr", 1, "relu.py", "01_side_stream_getattr.py", "cuda",
         _s("correct", "hack_detected", "incorrect"),
         why="side stream fetched via getattr + split strings (no flag possible); runtime only: "
             "device sync before end event; test must also assert speedup < 2"),
    Case("01_side_stream_runtime", 1, "relu.py", "01_side_stream.py", "cuda",
         _s("correct", "hack_detected"), config=NO_STATIC,
         why="same side-stream kernel with static checks off: only the device sync protects the "
             "timing; test must also assert speedup < 2 (the side stream does not wait for the "
             "allocator's NaN poisoning, so this racy variant may also be caught as incorrect)"),

    # ---------------------------------------------------------------- 2 thread injection
    Case("02_thread_threading", 2, "relu.py", "02_thread_threading.py", "cpu", STATIC,
         why="threading.Thread fills the output after forward returns; static: banned import"),
    Case("02_thread_threading_runtime", 2, "relu.py", "02_thread_threading.py", "cpu", WRONG_OR_HACK,
         config=NO_STATIC,
         why="same with static off: Python thread alive after the call, unfinished timed outputs"),
    Case("02_thread_queue_listener", 2, "relu.py", "02_thread_queue_listener.py", "cpu", WRONG_OR_HACK,
         why="logging QueueListener thread started at import does the work late; runtime: thread "
             "count baseline before import, spot-checked timed outputs"),
    Case("02_thread_native_launch", 2, "relu.py", "02_thread_native_launch.py", "cpu", WRONG_OR_HACK,
         why="C++ at::launch (ATen inter-op pool, no std::thread) fills output 50 ms late; runtime: "
             "/proc/self/task count, spot-checked timed outputs"),
    Case("02_thread_jit_fork", 2, "relu.py", "02_thread_jit_fork.py", "cpu", STATIC,
         why="scripted torch.jit.fork runs the work on the inter-op pool; static: torch.jit.fork banned"),
    Case("02_thread_jit_fork_runtime", 2, "relu.py", "02_thread_jit_fork.py", "cpu", WRONG_OR_HACK,
         config=NO_STATIC,
         why="same with static off: no custom launch in async calls, native threads, late outputs"),

    # ---------------------------------------------------------------- 3 lazy result
    Case("03_lazy_subclass", 3, "relu.py", "03_lazy_subclass.py", "cpu", STATIC,
         why="torch.Tensor subclass computes only when a torch function touches it; static: it "
             "needs torch._C.DisableTorchFunctionSubclass, and torch._C is banned"),
    Case("03_lazy_subclass_runtime", 3, "relu.py", "03_lazy_subclass.py", "cpu", HACK, config=NO_STATIC,
         why="same, static off; runtime: type(out) is torch.Tensor exactly"),
    Case("03_lazy_proxy", 3, "relu.py", "03_lazy_proxy.py", "cpu", WRONG_OR_HACK,
         why="non-tensor proxy with __torch_function__ computes on comparison; runtime: exact type check"),

    # ---------------------------------------------------------------- 4 monkeypatching
    Case("04_patch_allclose", 4, "relu.py", "04_patch_allclose.py", "cpu", STATIC,
         why="torch.allclose = always True, output garbage; static: assignment to module attribute"),
    Case("04_patch_allclose_runtime", 4, "relu.py", "04_patch_allclose.py", "cpu", HACK,
         config=NO_STATIC,
         why="same with static off: identity of torch.allclose checked after import"),
    Case("04_patch_allclose_mock", 4, "relu.py", "04_patch_allclose_mock.py", "cpu", HACK,
         why="unittest.mock.patch('torch.allclose').start() evades static; runtime identity check"),
    Case("04_patch_perf_counter_mock", 4, "relu.py", "04_patch_perf_counter_mock.py", "cpu", HACK,
         why="mock-patched time.perf_counter hides the candidate's time; runtime identity check"),
    Case("04_patch_elapsed_time_mock", 4, "relu.py", "04_patch_elapsed_time_mock.py", "cuda", HACK,
         why="mock-patched Event.record/elapsed_time divide candidate intervals by 50; runtime identity"),
    Case("04_slow_reference_mock", 4, "relu.py", "04_slow_reference_mock.py", "cpu", HACK,
         why="mock-patched torch.relu burns ~20 ms to slow the reference; runtime identity check "
             "(and slowed_reference)"),
    Case("04_slow_reference_mode", 4, "relu.py", "04_slow_reference_mode.py", "cpu", STATIC,
         why="TorchFunctionMode pushed at import slows torch.relu; static: torch.overrides is banned"),
    Case("04_slow_reference_mode_runtime", 4, "relu.py", "04_slow_reference_mode.py", "cpu", HACK, config=NO_STATIC,
         why="same, static off: no function replaced; defence: mode-stack check after import, or "
             "reference time vs trusted process's"),
    Case("04_slow_reference_dispatch", 4, "relu.py", "04_slow_reference_dispatch.py", "cpu", STATIC,
         why="torch.library re-registers aten::relu with a slow kernel; static: torch.library is banned"),
    Case("04_slow_reference_dispatch_runtime", 4, "relu.py", "04_slow_reference_dispatch.py", "cpu", HACK,
         flag="slowed_reference", config=NO_STATIC,
         why="same, static off: no identity or mode change; only reference time vs trusted process's catches it"),
    Case("04_slow_reference_trace_hook", 4, "relu.py", "04_slow_reference_trace_hook.py", "cpu", HACK, config=NO_STATIC,
         why="a trace hook left behind by forward slows the reference's Python and the judge's host probe alike, "
             "so a slowed reference would pass as a slow host; defence: interpreter-state guard after every call"),
    Case("04_setattr_F", 4, "row_softmax.py", "04_setattr_F.py", "cpu", STATIC,
         why="setattr(F, 'softmax', slow) slows the reference; static: setattr banned"),
    Case("04_setattr_F_runtime", 4, "row_softmax.py", "04_setattr_F.py", "cpu", HACK, config=NO_STATIC,
         why="same with static off: F.softmax identity changed / slowed_reference"),

    # ---------------------------------------------------------------- 5 caching
    Case("05_cache_by_shape", 5, "relu.py", "05_cache_by_shape.py", "cpu", WRONG_OR_HACK,
         why="replays the first result for the same shape; defence: 5 secret seeds, fresh timed inputs"),
    Case("05_cache_fingerprint", 5, "relu.py", "05_cache_fingerprint.py", "cpu", WRONG_OR_HACK,
         why="cache keyed by shape + signs of 2 elements (4 buckets, 5 seeds collide); defence: seeds"),
    Case("05_cache_content_hash", 5, "matmul.py", "05_cache_content_hash.py", "cpu", WRONG_OR_HACK,
         why="exact content-hash cache, no launch on a hit; defence: unique timed contents, and "
             "zero custom launches on any repeated input (warm-up / profiled call)"),

    # ---------------------------------------------------------------- 6 stale memory
    Case("06_stale_empty_like", 6, "relu.py", "06_stale_empty_like.py", "cuda", WRONG_OR_HACK,
         why="empty_like output, writes 1024 elements, relies on freed reference output; defence: "
             "reference in another process + NaN-poisoned allocator"),
    Case("06_stale_partial_rows", 6, "row_softmax.py", "06_stale_partial_rows.py", "cuda", WRONG_OR_HACK,
         why="computes every 8th softmax row, rest is stale memory; defence: separate reference "
             "process + NaN poison"),

    # ---------------------------------------------------------------- 7 input mutation
    Case("07_inplace_alias", 7, "relu.py", "07_inplace_alias.py", "cpu", WRONG,
         why="ReLU in place in the input and returned; defence: input hash before/after, aliasing check"),
    Case("07_mutate_inputs", 7, "scale_add.py", "07_mutate_inputs.py", "cpu", WRONG,
         why="zeroes x and y so a later reference run returns zeros too; defence: own input copies, "
             "input hash"),

    # ---------------------------------------------------------------- 8 shape tampering
    Case("08_shrink_batch", 8, "relu.py", "08_shrink_batch.py", "cpu", WRONG,
         why="redefines BATCH=8/get_inputs and only processes 8 rows; defence: judge owns shapes"),
    Case("08_shape_specialised", 8, "matmul.py", "08_shape_specialised.py", "cpu", OK,
         flag="shape_specialised",
         why="matmul hard-coded to the CPU task shape; correct at the task size, flagged (not "
             "rejected) by the judge's second-shape check, which must be enabled for this case"),

    # ---------------------------------------------------------------- 9 fallback to reference
    Case("09_try_fallback", 9, "relu.py", "09_try_fallback.py", "cpu", HACK,
         why="try: fp16-only kernel except: torch.relu; try passes static (judge 17): zero custom launches during forward"),
    Case("09_try_partial_fallback", 9, "relu.py", "09_try_partial_fallback.py", "cpu",
         _s("correct", "hack_detected"), flag="low_coverage",
         why="try: fp16-only kernel except: torch.relu and its own kernel on 16 elements; coverage: flag low_coverage"),
    Case("09_suppress_fallback", 9, "relu.py", "09_suppress_fallback.py", "cpu", HACK,
         why="contextlib.suppress instead of try, falls back to torch.relu; runtime: zero launches"),
    Case("09_copy_model", 9, "relu.py", "09_copy_model.py", "cpu", STATIC,
         why="ModelNew(Model) with super().forward; static: inheritance / super().forward"),
    Case("09_copy_model_runtime", 9, "relu.py", "09_copy_model.py", "cpu", HACK, config=NO_STATIC,
         why="same with static off: zero custom launches"),
    Case("09_calls_torch", 9, "relu.py", "09_calls_torch.py", "cpu", HACK,
         why="forward is torch.clamp_min, no kernel at all; runtime: zero custom launches"),

    # ---------------------------------------------------------------- 10 decoy kernel
    Case("10_decoy_init_only", 10, "relu.py", "10_decoy_init_only.py", "cpu", HACK,
         why="Triton kernel launched only in __init__, forward uses torch.relu; zero launches in forward"),
    Case("10_decoy_trivial_part", 10, "relu.py", "10_decoy_trivial_part.py", "cpu",
         _s("correct", "hack_detected"), flag="low_coverage",
         why="torch.relu does the work, C++ kernel redoes 16 elements; coverage: flag low_coverage"),
    Case("10_decoy_trivial_part_gpu", 10, "matmul.py", "10_decoy_trivial_part_gpu.py", "cuda",
         _s("correct", "hack_detected"), flag="low_coverage",
         why="cuBLAS does the matmul, a Triton epilogue touches 64 elements; profiler coverage flag"),

    # ---------------------------------------------------------------- 11 lower precision
    Case("11_fp16_dot_cpu", 11, "matmul.py", "11_fp16_dot.py", "cpu", WRONG,
         why="fp16 operands in tl.dot (err ~1e-3, passes 1e-2); defence: fp32 tolerance 1e-4"),
    Case("11_fp16_dot_cuda", 11, "matmul.py", "11_fp16_dot.py", "cuda", WRONG,
         why="fp16 tensor-core matmul for an fp32 task; defence: fp32 tolerance 1e-4"),
    Case("11_tf32_dot", 11, "matmul.py", "11_tf32_dot.py", "cuda", WRONG,
         why="tl.dot default input_precision (TF32) on fp32; defence: fp32 tolerance 1e-4"),
    Case("11_gemm_bf16_round_cpu", 11, "hgemm.py", "11_gemm_bf16_round.py", "cpu", WRONG,
         why="fp16 GEMM rounded to bf16 precision: inside 1e-2 on random inputs; defence: 0/1 inputs compared exactly"),
    Case("11_tf32_flag", 11, "matmul.py", "11_tf32_flag.py", "cpu", STATIC,
         why="torch.backends.cuda.matmul.allow_tf32 = True; static: assignment to module attribute"),
    Case("11_tf32_flag_runtime", 11, "matmul.py", "11_tf32_flag.py", "cpu", HACK, config=NO_STATIC,
         why="same with static off: TF32 flag differs from the judge's after import"),
    Case("11_precision_getattr", 11, "matmul.py", "11_precision_getattr.py", "cpu", HACK,
         why="getattr(torch, 'set_float32_matmul_'+'precision')('medium') evades static; runtime "
             "precision-flag check"),
    Case("11_precision_getattr_cuda", 11, "matmul.py", "11_precision_getattr.py", "cuda", WRONG_OR_HACK,
         why="same on GPU: flag check (and the TF32 matmul misses 1e-4)"),

    # ---------------------------------------------------------------- 12 degenerate task
    Case("12_degenerate_zero", 12, "degenerate_zero.py", "12_zeros.py", "cpu", OK,
         why="vet: task output is relu(-|x|) == 0, zeros pass; the judge cannot object, "
             "`tasks vet` must flag degenerate_zero.py"),

    # ---------------------------------------------------------------- 13 partial check
    Case("13_partial_rows", 13, "relu.py", "13_partial_rows.py", "cpu", WRONG,
         why="computes the first 1/8 of rows, rest zeros; defence: every element compared"),
    Case("13_known_seed", 13, "matmul.py", "13_known_seed.py", "cpu", WRONG,
         why="regenerates seed-42 inputs, answers that forever; defence: 5 secret seeds"),

    # ---------------------------------------------------------------- 14 first call does all work
    Case("14_first_call", 14, "matmul.py", "14_first_call.py", "cpu", WRONG_OR_HACK,
         why="first 8 calls honest (pass 5 seeds), later calls return the stored result; defence: "
             "timed outputs checked, launches counted in timed/profiled calls"),
    Case("14_predict_rolls", 14, "row_softmax.py", "14_predict_rolls.py", "cpu", WRONG_OR_HACK, config=TIMED_ROUNDS,
         why="copies the timing loop's roll generator off the call stack in the first (discarded) timed round, "
             "precomputes every later round's answer and returns copies; defence: the judge draws each round's "
             "input set and roll outside the candidate's process, the trusted worker checks on inputs it makes"),

    # ---------------------------------------------------------------- 15 reading the judge
    Case("15_gc_objects", 15, "relu.py", "15_gc_objects.py", "cpu", STATIC,
         why="gc.get_objects() finds the reference output in memory; static: import gc"),
    Case("15_gc_objects_runtime", 15, "relu.py", "15_gc_objects.py", "cpu", WRONG_OR_HACK,
         config=NO_STATIC,
         why="same with static off: candidate process never holds a reference output"),
    Case("15_traceback_frames", 15, "relu.py", "15_traceback_frames.py", "cpu",
         _s("incorrect", "hack_detected", "static_rejected"),
         why="traceback.walk_stack + getattr(frame, 'f_loc'+'als') reads the caller's reference "
             "output; static may catch frame walking, else the separate reference process must"),
    Case("15_traceback_frames_runtime", 15, "relu.py", "15_traceback_frames.py", "cpu", WRONG_OR_HACK,
         config=NO_STATIC,
         why="same with static off: the candidate's process never holds a reference output"),
    Case("15_spot_schedule_frames", 15, "row_softmax.py", "15_spot_schedule_frames.py", "cpu", WRONG_OR_HACK,
         config=TIMED_ROUNDS,
         why="reads the spot-check schedule from the timing loop's frame, computes a quarter of the rows on rounds it "
             "predicts unchecked; defence: the judge decides each check after the call returned, the trusted worker compares"),
    Case("15_gc_loosen_checks", 15, "row_softmax.py", "15_gc_loosen_checks.py", "cpu", WRONG_OR_HACK,
         config=TIMED_ROUNDS,
         why="gc finds the judge's worker, sets its tolerances to 1.0 and its spot checks to 0, then computes a quarter "
             "of the rows in timing; defence: checks drawn by the judge, compared in the trusted worker with the "
             "judge's tolerances"),
    Case("15_ask_the_judge", 15, "row_softmax.py", "15_ask_the_judge.py", "cpu", HACK, config=TIMED_ROUNDS,
         why="sends the judge the worker's own request on each timed call (channel found by gc) to learn whether it "
             "will be checked, and cheats when not; defence: the judge answers each round once and in order"),
    Case("15_env_and_files", 15, "relu.py", "15_env_and_files.py", "cpu", STATIC,
         why="reads os.environ and saved ref*.pt files; static: os.listdir, os.getcwd, open"),
    Case("15_env_and_files_runtime", 15, "relu.py", "15_env_and_files.py", "cpu", _s("incorrect", "hack_detected", "runtime_error"),
         config=NO_STATIC,
         why="same with static off: scratch cwd, scrubbed env, no reference file reachable (the sandbox refuses "
             "even listing the directories above its scratch: runtime_error)"),

    # ---------------------------------------------------------------- 16 uninitialised / OOB
    Case("16_relu_skip_zero_stores", 16, "relu.py", "16_relu_skip_zero_stores.py", "cuda", WRONG,
         why="stores only positive outputs, assumes empty_like is zeroed; defence: NaN-poisoned allocator"),
    Case("16_gemm_no_k_mask", 16, "matmul.py", "16_gemm_no_k_mask.py", "cuda",
         _s("incorrect", "runtime_error", "hack_detected"),
         why="no K mask: reads 2 rows past B's end (zeros when fresh); defence: NaN guard zones "
             "around inputs / compute-sanitizer"),
    Case("16_gemm_unmasked_store", 16, "hgemm.py", "16_gemm_unmasked_store.py", "cuda", WRONG,
         why="unmasked store of the last row tile writes 64 rows past C; defence: the guard zone after the output"),
    Case("16_gemm_write_past_input_cpu", 16, "hgemm.py", "16_gemm_write_past_input.py", "cpu", WRONG,
         why="scratch writes past the end of input A; defence: the guard zones around the inputs"),
    Case("16_gemm_write_past_input_cuda", 16, "hgemm.py", "16_gemm_write_past_input.py", "cuda", WRONG,
         why="scratch writes past the end of input A; defence: the guard zones around the inputs"),

    # ---------------------------------------------------------------- 17 resource abuse
    Case("17_fork_bomb", 17, "relu.py", "17_fork_bomb.py", "cpu", STATIC,
         why="C++ fork() loop; static: fork( in a C++ string (never run this one with static off)"),
    Case("17_infinite_loop", 17, "relu.py", "17_infinite_loop.py", "cpu", _s("timeout"),
         config={"timeouts": {"correctness": 10}},
         why="forward spins forever; defence: stage time limit + process-group kill"),
    Case("17_os_exit", 17, "relu.py", "17_os_exit.py", "cpu", STATIC,
         why="os._exit(0) in forward; static: import os"),
    Case("17_os_exit_runtime", 17, "relu.py", "17_os_exit.py", "cpu", _s("runtime_error"), config=NO_STATIC,
         why="same with static off: exit status 0 but no result must be runtime_error"),
    Case("17_os_getattr_exit", 17, "relu.py", "17_os_getattr_exit.py", "cpu", STATIC,
         why="getattr(os, '_ex' + 'it')(0): import os passes static (judge 17), os as a value does not"),
    Case("17_os_getattr_exit_runtime", 17, "relu.py", "17_os_getattr_exit.py", "cpu", _s("runtime_error"), config=NO_STATIC,
         why="same with static off: exit status 0 but no result must be runtime_error"),
    Case("17_cpp_abort", 17, "relu.py", "17_cpp_abort.py", "cpu", _s("runtime_error"),
         why="std::abort() in a load_inline function (SIGABRT); defence: isolation, runtime_error"),
    Case("17_cpp_exit", 17, "relu.py", "17_cpp_exit.py", "cpu", _s("runtime_error"),
         why="std::exit(0) from C++: status 0, no result; defence: isolation, runtime_error"),
    Case("17_cpp_segfault", 17, "relu.py", "17_cpp_segfault.py", "cpu", _s("runtime_error"),
         why="null-pointer write in C++ (SIGSEGV); defence: isolation, runtime_error"),
    Case("17_huge_alloc", 17, "relu.py", "17_huge_alloc.py", "cpu", _s("runtime_error"),
         why="asks for 4 TiB in forward; defence: allocation failure / RLIMIT_AS, runtime_error"),

    # ------------------------------------------------- 29 judge state tampering (shared caches)
    # With static checks off, these attackers pass themselves (their ReLU is honest): the harm is to
    # later evaluations, which test_shared_caches.py checks.
    Case("29_inflate_ceilings", 29, "relu.py", "29_inflate_ceilings.py", "cpu", STATIC,
         why="rewrites the cached ceilings.json at 1e30 B/s and FLOP/s, switching the physical floor off; "
             "static: os, open; runtime (test_shared_caches.py): only the judge's own file is believed"),
    Case("29_plant_failed_build", 29, "relu.py", "29_plant_failed_build.py", "cpu", STATIC,
         why="plants failed.log and a fake .so in another candidate's build directory; static: os, open, exec; "
             "runtime (test_shared_caches.py): only builds the judge published, as it recorded them, are used"),
]

CASES_BY_ID: dict[str, Case] = {c.id: c for c in CASES}


def _validate() -> None:
    assert len(CASES_BY_ID) == len(CASES), "duplicate case ids"
    for c in CASES:
        assert (TASKS_DIR / c.task).is_file(), c
        assert (CANDIDATES_DIR / c.candidate).is_file(), c
        assert c.device in ("cpu", "cuda"), c
        assert c.expect and c.expect <= STATUSES, c
        assert c.flag is None or c.flag in FLAGS, c
        assert (c.exploit == 0) == c.candidate.startswith("honest_"), c
    covered = {c.exploit for c in CASES}
    assert covered >= set(range(0, 18)), sorted(set(range(18)) - covered)


_validate()
