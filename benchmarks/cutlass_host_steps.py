"""Where the CUTLASS template's host time goes, step by step, timed inside its own extension (Hopper).

A CUTLASS candidate's call spends several microseconds more on the host than torch.matmul's or the
Triton template's C++ launch (verdict_gap.py). This builds the template's kernel and binding with an
extra entry point that times each step of a call with the host's steady clock, every call from an idle
device as under the judge's clock, and prints medians in microseconds:
  lookup    finding the shape's plan
  readdress copying the shape's kernel parameters and writing this call's addresses into its descriptors
            (stream-K: the parameters kept for the stream's workspace)
  encode    building the parameters anew (three TMA descriptors encoded), what a call did before plans
  zero      stream-K only: zeroing the workspace's barrier flags (CUTLASS's initialize_workspace), every call
  runtime   the launch through the runtime (cudaLaunchKernelEx), as the template launched until judge v8
  driver    the same launch through the driver (cuLaunchKernelEx), as it launches now
  run       the whole C++ call (kc_cutlass_run)
then, timed from Python the same way (py_): torch.empty of the output, the candidate's whole call,
torch.matmul; and the host part of the last two under the judge's clock (clk_: L2 flushed, start event
recorded before the call), the candidate's call wrapped by the judge's launch counter as in a verdict.

    python benchmarks/cutlass_host_steps.py --shapes 2048x2048x2048,8192x1024x8192,64x12288x64
"""

from __future__ import annotations

import argparse
import ast
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import torch
from torch.utils.cpp_extension import load_inline

from kernelcraft.judge import TimingConfig
from kernelcraft.judge.worker.launches import LaunchCounter
from kernelcraft.judge.worker.timing import Clock
from kernelcraft.search.gemm_cutlass import NVCC_FLAGS, CutlassConfig, cutlass_include_dirs, render_cuda, render_cutlass
from kernelcraft.tasks.hgemm import parse_shapes

CONFIGS = {
    "coop_c2x1": CutlassConfig(128, 256, 64, 2, 1, "cutlass_cooperative", "persistent", 1),
    "pingpong_c1x1": CutlassConfig(64, 128, 64, 1, 1, "cutlass_pingpong", "persistent", 1),
    "streamk_c1x1": CutlassConfig(128, 128, 64, 1, 1, "cutlass_cooperative", "streamk", 1, 1),
}
STEPS = ("lookup", "readdress", "encode", "zero", "runtime", "driver", "run")

STEPS_CU = r"""
#include <algorithm>
#include <chrono>

namespace kc_steps {
using Clock = std::chrono::steady_clock;
double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
cudaLaunchConfig_t runtime_config(const kc::Kernel::Params& params, cudaStream_t stream, cudaLaunchAttribute* cluster) {
  cluster[0].id = cudaLaunchAttributeClusterDimension;
  cluster[0].val.clusterDim.x = cute::size<0>(kc::ClusterShape{});
  cluster[0].val.clusterDim.y = cute::size<1>(kc::ClusterShape{});
  cluster[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = kc::Kernel::get_grid_shape(params);
  config.blockDim = kc::Kernel::get_block_shape();
  config.dynamicSmemBytes = kc::Kernel::SharedStorageSize;
  config.stream = stream;
  config.attrs = cluster;
  config.numAttrs = 1;
  return config;
}
}  // namespace kc_steps

// Medians in us of each step (see the script's docstring) over `iters` calls, into out[0..6]; 0 on
// success, else the step that failed. `workspace`: the plan's (stream-K), kept for this stream.
int kc_host_steps(const void* a, const void* b, void* c, void* workspace, int m, int n, int k, int swizzle,
                  int device, void* stream_handle, int iters, double* out) {
  using namespace kc_steps;
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  long long bytes = -1;
  const int plan = kc_cutlass_plan(m, n, k, swizzle, 0, 1, device, &bytes);
  if (bytes < 0 || (bytes > 0) != (workspace != nullptr)) return 1;
  if (kc_cutlass_run(plan, a, b, c, workspace, stream_handle) != 0) return 2;  // builds the parameters
  cudaFunction_t fn = nullptr;
  if (cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(kc_cutlass_gemm)) != cudaSuccess) return 3;
  std::vector<double> t[7];
  for (int i = 0; i < iters; ++i) {
    cudaDeviceSynchronize();
    auto t0 = Clock::now();
    long long w = 0;
    const int found = kc_cutlass_plan(m, n, k, swizzle, 0, 1, device, &w);
    auto t1 = Clock::now();
    kc::Kernel::Params params;
    {
      std::lock_guard<std::mutex> hold(kc::plans_lock);
      const kc::Plan& p = kc::plans[static_cast<size_t>(found)];
      params = workspace ? p.slots.front().params : *p.params;
    }
    if (!kc::readdress(params, a, b, c)) return 4;
    auto t2 = Clock::now();
    auto args = kc::arguments(a, b, c, m, n, k, swizzle, 0, 1, device, kc::sms_of(device));
    volatile int fresh = kc::Kernel::to_underlying_arguments(args, workspace).hw_info.sm_count;  // kept, not optimized away
    (void)fresh;
    auto t3 = Clock::now();
    // every launch of a stream-K kernel needs its barrier flags zeroed first: a kernel that found them
    // set would wait for counts that never come
    if (workspace && kc::Kernel::initialize_workspace(args, workspace, stream) != cutlass::Status::kSuccess) return 8;
    auto t3z = Clock::now();
    cudaLaunchAttribute cluster[1];
    cudaLaunchConfig_t config = runtime_config(params, stream, cluster);
    if (cudaLaunchKernelEx(&config, kc_cutlass_gemm, params) != cudaSuccess) return 5;
    auto t4 = Clock::now();
    cudaDeviceSynchronize();
    if (workspace && kc::Kernel::initialize_workspace(args, workspace, stream) != cutlass::Status::kSuccess) return 8;
    CUlaunchAttribute dim[1];
    dim[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    dim[0].value.clusterDim.x = config.attrs[0].val.clusterDim.x;
    dim[0].value.clusterDim.y = config.attrs[0].val.clusterDim.y;
    dim[0].value.clusterDim.z = 1;
    CUlaunchConfig driver{};
    driver.gridDimX = config.gridDim.x;
    driver.gridDimY = config.gridDim.y;
    driver.gridDimZ = config.gridDim.z;
    driver.blockDimX = config.blockDim.x;
    driver.blockDimY = config.blockDim.y;
    driver.blockDimZ = config.blockDim.z;
    driver.sharedMemBytes = config.dynamicSmemBytes;
    driver.hStream = stream;
    driver.attrs = dim;
    driver.numAttrs = 1;
    void* kernel_args[] = {&params};
    auto t5 = Clock::now();
    if (cuLaunchKernelEx(&driver, reinterpret_cast<CUfunction>(fn), kernel_args, nullptr) != CUDA_SUCCESS) return 6;
    auto t6 = Clock::now();
    cudaDeviceSynchronize();
    auto t7 = Clock::now();
    if (kc_cutlass_run(plan, a, b, c, workspace, stream_handle) != 0) return 7;
    auto t8 = Clock::now();
    t[0].push_back(us(t0, t1));
    t[1].push_back(us(t1, t2));
    t[2].push_back(us(t2, t3));
    t[3].push_back(us(t3, t3z));
    t[4].push_back(us(t3z, t4));
    t[5].push_back(us(t5, t6));
    t[6].push_back(us(t7, t8));
  }
  cudaDeviceSynchronize();
  for (int s = 0; s < 7; ++s) out[s] = median(t[s]);
  return 0;
}
"""

STEPS_CPP = r"""
int kc_host_steps(const void* a, const void* b, void* c, void* workspace, int m, int n, int k, int swizzle,
                  int device, void* stream_handle, int iters, double* out);

std::vector<double> steps(const torch::Tensor& a, const torch::Tensor& b, int64_t swizzle, int64_t iters) {
  auto c = torch::empty({a.size(0), b.size(1)}, a.options());
  const int device = a.get_device();
  void* stream = current_stream(device);
  long long bytes = -1;
  const int plan = kc_cutlass_plan(a.size(0), b.size(1), a.size(1), swizzle, 0, 1, device, &bytes);
  TORCH_CHECK(bytes >= 0, "the CUTLASS GEMM cannot take this shape");
  std::vector<double> out(7, 0.0);
  const int rc = kc_host_steps(a.data_ptr(), b.data_ptr(), c.data_ptr(), bytes ? workspace_for(plan, stream, bytes, a) : nullptr,
                               a.size(0), b.size(1), a.size(1), swizzle, device, stream, iters, out.data());
  TORCH_CHECK(rc == 0, "kc_host_steps failed at step ", rc);
  return out;
}
"""


def binding(config: CutlassConfig) -> str:
    """The candidate's own torch binding (its `_CPP`), as the judge builds it."""
    tree = ast.parse(render_cutlass(config))
    return next(node.value.value for node in tree.body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_CPP")


def build(name: str, config: CutlassConfig) -> Any:
    return load_inline(f"kc_steps_{name}", cpp_sources=[binding(config) + STEPS_CPP],
                       cuda_sources=[render_cuda(config) + STEPS_CU], functions=["gemm", "steps"],
                       extra_include_paths=cutlass_include_dirs(), extra_ldflags=["-lcuda"], with_cuda=True,
                       extra_cuda_cflags=NVCC_FLAGS)


def python_host_us(fn: Callable[[], Any], iters: int) -> float:
    """The median host time of `fn` from an idle device, as the judge's clock sees a call's host part."""
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def clock_host_us(clock: Clock, fn: Callable[..., Any], args: list[Any], iters: int) -> float:
    """The median host part of `fn` under the judge's clock."""
    times = []
    for _ in range(iters):
        clock.time_call(fn, args)
        times.append(clock.host_ms * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="2048x2048x2048,8192x1024x8192,64x12288x64")
    ap.add_argument("--iters", type=int, default=300)
    args = ap.parse_args()
    if torch.cuda.get_device_capability() != (9, 0) or cutlass_include_dirs() is None:
        raise SystemExit("cutlass_host_steps: needs a Hopper GPU and CUTLASS's headers")
    torch.set_grad_enabled(False)
    with ThreadPoolExecutor(len(CONFIGS)) as pool:  # the nvcc builds, side by side
        exts = dict(zip(CONFIGS, pool.map(lambda item: build(*item), CONFIGS.items())))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; median us per step, from an idle device")
    clock = Clock(torch.device("cuda"), TimingConfig())
    counter = LaunchCounter()
    counted = {name: counter.wrap("ext:gemm", ext.gemm) for name, ext in exts.items()}
    columns = (*STEPS, "py_empty", "py_call", "py_matmul", "clk_call", "clk_matmul")
    print(f"{'shape':>16} {'config':>14} " + " ".join(f"{c:>10}" for c in columns))
    for s in parse_shapes(args.shapes):
        a = torch.randn(s.m, s.k, device="cuda", dtype=torch.float16)
        b = torch.randn(s.k, s.n, device="cuda", dtype=torch.float16)
        for name, ext in exts.items():
            torch.testing.assert_close(ext.gemm(a, b, 1, 0, 1), torch.matmul(a, b), atol=2e-1, rtol=2e-2)
            steps = ext.steps(a, b, 1, args.iters)
            py = [python_host_us(fn, args.iters) for fn in (
                lambda: torch.empty((s.m, s.n), device="cuda", dtype=torch.float16),
                lambda: ext.gemm(a, b, 1, 0, 1), lambda: torch.matmul(a, b))]
            clk = [clock_host_us(clock, counted[name], [a, b, 1, 0, 1], args.iters),
                   clock_host_us(clock, torch.matmul, [a, b], args.iters)]
            print(f"{s.m}x{s.n}x{s.k}".rjust(16) + f" {name:>14} " + " ".join(f"{v:10.2f}" for v in (*steps, *py, *clk)))


if __name__ == "__main__":
    main()
