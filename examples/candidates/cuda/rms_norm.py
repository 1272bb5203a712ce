# CUDA candidate: RMSNorm with one block per row: sum of squares (fp32, warp-shuffle tree), then
# scale; the second read of the row hits L1/L2. Eager launches ~6 full-tensor kernels.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int kThreads = 256;

// Sum over the block; every thread gets the total.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_sums[kThreads / 32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < kThreads / 32 ? warp_sums[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                            float* __restrict__ out, int64_t d, float eps) {
    const float* xr = x + (int64_t)blockIdx.x * d;
    float* orow = out + (int64_t)blockIdx.x * d;
    float acc = 0.f;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int64_t j = threadIdx.x; j < d / 4; j += kThreads) {
            const float4 v = x4[j];
            acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int64_t j = threadIdx.x; j < d; j += kThreads) acc += xr[j] * xr[j];
    }
    const float mean = block_sum(acc) / (float)d;
    const float inv = rsqrtf(mean + eps);
    // same rounding order as eager: (x * rms) * weight
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        float4* o4 = reinterpret_cast<float4*>(orow);
        for (int64_t j = threadIdx.x; j < d / 4; j += kThreads) {
            const float4 v = x4[j];
            const float4 g = w4[j];
            o4[j] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
        }
    } else {
        for (int64_t j = threadIdx.x; j < d; j += kThreads) orow[j] = xr[j] * inv * w[j];
    }
}

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    TORCH_CHECK(weight.device() == x.device() && weight.scalar_type() == torch::kFloat32 && weight.dim() == 1,
                "1-d float32 weight on the same device expected");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    const int64_t d = weight.numel();
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == d, "weight length must match the last dim of x");
    auto out = torch::empty_like(x);
    const int64_t rows = d == 0 ? 0 : x.numel() / d;
    if (rows == 0) return out;
    TORCH_CHECK(rows < (1LL << 31), "too many rows");
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(weight.data_ptr<float>()) % 16 == 0;
    if (vec)
        rms_norm_kernel<true><<<(unsigned)rows, kThreads, 0, stream>>>(x.data_ptr<float>(), weight.data_ptr<float>(),
                                                                      out.data_ptr<float>(), d, (float)eps);
    else
        rms_norm_kernel<false><<<(unsigned)rows, kThreads, 0, stream>>>(x.data_ptr<float>(), weight.data_ptr<float>(),
                                                                       out.data_ptr<float>(), d, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_CPP = "torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps);"

_ext = load_inline(
    name="kc_cuda_rms_norm",
    cpp_sources=[_CPP],
    cuda_sources=[_CUDA],
    functions=["rms_norm"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        # created exactly like the reference so seeded init / load_state_dict give equal weights
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return _ext.rms_norm(x, self.weight, self.eps)
