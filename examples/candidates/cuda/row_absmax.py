# CUDA candidate: max |x| per row, one warp per row, one read of x (eager writes |x| to memory
# and reads it back). NaN propagates like torch.amax.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int kWarpsPerBlock = 8;

// max that keeps NaN (fmaxf would drop it)
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || a > b) ? a : b; }

template <bool VEC>
__global__ void row_absmax_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t n) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= rows) return;  // whole warp leaves together
    const float* xr = x + row * n;
    float m = 0.f;  // |x| >= 0, so 0 is a neutral start
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int64_t j = lane; j < n / 4; j += 32) {
            const float4 v = x4[j];
            m = nan_max(m, fabsf(v.x));
            m = nan_max(m, fabsf(v.y));
            m = nan_max(m, fabsf(v.z));
            m = nan_max(m, fabsf(v.w));
        }
    } else {
        for (int64_t j = lane; j < n; j += 32) m = nan_max(m, fabsf(xr[j]));
    }
    for (int o = 16; o > 0; o >>= 1) m = nan_max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) out[row] = m;
}

torch::Tensor row_absmax(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, "non-empty last dim expected");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    const int64_t n = x.size(-1);
    const int64_t rows = x.numel() / n;
    auto out = torch::empty(x.sizes().slice(0, x.dim() - 1), x.options());
    if (rows == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const unsigned blocks = (unsigned)((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
    if (n % 4 == 0 && reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0)
        row_absmax_kernel<true><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, n);
    else
        row_absmax_kernel<false><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_CPP = "torch::Tensor row_absmax(torch::Tensor x);"

_ext = load_inline(
    name="kc_cuda_row_absmax",
    cpp_sources=[_CPP],
    cuda_sources=[_CUDA],
    functions=["row_absmax"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.row_absmax(x)
