// kernelcraft: the Triton kernels compiled for one GEMM shape, launched from C++.
// Triton's Python launcher costs several microseconds of host time per call, which a GEMM of a
// few microseconds pays in full; here a forward call is one C++ function that allocates the output
// and hands the kernels Triton compiled for this exact shape, layout and alignment to
// cuLaunchKernel on the current stream. Anything else returns an undefined tensor (None in Python),
// and the caller takes Triton's own launcher.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

constexpr size_t kMaxParams = 32;

struct Launch {
  CUfunction fn;
  unsigned grid[3];
  unsigned threads;
  unsigned shared;
  // One letter per kernel parameter: a, b, c are those tensors' addresses, w and n split-K's
  // workspace and tile counters, 0 a null pointer (Triton's unused scratch parameters), v the
  // integer in `values`.
  std::string roles;
  std::vector<int64_t> values;
};

struct Scratch {
  CUstream stream;
  // Never freed: it lives as long as the process's plans, and a static tensor's destructor would
  // run after CUDA's teardown at exit.
  torch::Tensor* buffer;
};

struct Plan {
  int64_t owner, device, m, n, k, lda, ldb, aligned, ws_elems, count_elems;
  std::vector<Launch> launches;
  // Split-K's fp32 workspace then its int32 tile counters, one buffer per stream: the kernel leaves
  // the counters at zero, so a buffer is zeroed once, when made, and two streams never share one.
  std::vector<Scratch> scratch;
};

std::vector<Plan> plans;

int64_t aligned_bits(const torch::Tensor& a, const torch::Tensor& b) {
  // Triton specializes pointers on 16-byte alignment: a kernel compiled for aligned inputs must not
  // see unaligned ones.
  return (reinterpret_cast<uintptr_t>(a.data_ptr()) % 16 == 0 ? 1 : 0) |
         (reinterpret_cast<uintptr_t>(b.data_ptr()) % 16 == 0 ? 2 : 0);
}

char* scratch_for(Plan& p, CUstream stream, const torch::Tensor& like) {
  for (const Scratch& s : p.scratch) {
    if (s.stream == stream) return static_cast<char*>(s.buffer->data_ptr());
  }
  auto* buffer = new torch::Tensor(at::zeros({p.ws_elems + p.count_elems}, like.options().dtype(at::kFloat)));
  p.scratch.push_back(Scratch{stream, buffer});
  return static_cast<char*>(buffer->data_ptr());
}

}  // namespace

// `owner` names the Python module whose kernels these are: every template kernel of a process shares
// this extension, and two of them may have kernels for the same shape.
int64_t add_plan(int64_t owner, int64_t device, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                 int64_t aligned, int64_t ws_elems, int64_t count_elems) {
  plans.push_back(Plan{owner, device, m, n, k, lda, ldb, aligned, ws_elems, count_elems, {}, {}});
  return static_cast<int64_t>(plans.size()) - 1;
}

void add_launch(int64_t plan, int64_t function, int64_t gx, int64_t gy, int64_t gz, int64_t threads, int64_t shared,
                const std::string& roles, const std::vector<int64_t>& values) {
  TORCH_CHECK(roles.size() == values.size() && roles.size() <= kMaxParams, "add_launch: bad parameter list");
  Launch l;
  l.fn = reinterpret_cast<CUfunction>(function);
  l.grid[0] = static_cast<unsigned>(gx);
  l.grid[1] = static_cast<unsigned>(gy);
  l.grid[2] = static_cast<unsigned>(gz);
  l.threads = static_cast<unsigned>(threads);
  l.shared = static_cast<unsigned>(shared);
  l.roles = roles;
  l.values = values;
  plans.at(static_cast<size_t>(plan)).launches.push_back(l);
}

torch::Tensor run(const torch::Tensor& a, const torch::Tensor& b, int64_t owner) {
  if (!a.is_cuda() || !b.is_cuda() || a.dim() != 2 || b.dim() != 2 || a.scalar_type() != at::kHalf ||
      b.scalar_type() != at::kHalf || a.stride(1) != 1 || b.stride(1) != 1 || a.size(1) != b.size(0) ||
      a.get_device() != b.get_device()) {
    return torch::Tensor();
  }
  const int64_t device = a.get_device();
  const int64_t aligned = aligned_bits(a, b);
  for (Plan& p : plans) {
    if (p.owner != owner || p.device != device || p.m != a.size(0) || p.n != b.size(1) || p.k != a.size(1) ||
        p.lda != a.stride(0) || p.ldb != b.stride(0) || p.aligned != aligned) {
      continue;
    }
    CUcontext ctx = nullptr;
    // The kernels belong to the device's primary context; another current device is left to Triton.
    if (device != c10::cuda::current_device() || cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
      return torch::Tensor();
    }
    torch::Tensor c = at::empty({p.m, p.n}, a.options());
    CUstream stream = at::cuda::getCurrentCUDAStream(device).stream();
    char* ws = p.ws_elems ? scratch_for(p, stream, a) : nullptr;
    for (const Launch& l : p.launches) {
      int64_t slots[kMaxParams];
      void* params[kMaxParams];
      for (size_t i = 0; i < l.roles.size(); ++i) {
        switch (l.roles[i]) {
          case 'a': slots[i] = reinterpret_cast<int64_t>(a.data_ptr()); break;
          case 'b': slots[i] = reinterpret_cast<int64_t>(b.data_ptr()); break;
          case 'c': slots[i] = reinterpret_cast<int64_t>(c.data_ptr()); break;
          case 'w': slots[i] = reinterpret_cast<int64_t>(ws); break;
          case 'n': slots[i] = reinterpret_cast<int64_t>(ws + p.ws_elems * sizeof(float)); break;
          case '0': slots[i] = 0; break;
          default: slots[i] = l.values[i];  // an i32 parameter reads the low half (little-endian)
        }
        params[i] = &slots[i];
      }
      CUresult r = cuLaunchKernel(l.fn, l.grid[0], l.grid[1], l.grid[2], l.threads, 1, 1, l.shared, stream, params,
                                  nullptr);
      TORCH_CHECK(r == CUDA_SUCCESS, "cuLaunchKernel failed with CUresult ", static_cast<int>(r));
    }
    return c;
  }
  return torch::Tensor();
}
