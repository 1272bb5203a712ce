# CUDA candidate: x * sigmoid(x) + y in one grid-stride kernel with float4 loads
# (eager: sigmoid, mul, add = three kernels and two temporaries).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>

// expf (not __expf): same accuracy class as PyTorch's sigmoid kernel
__device__ __forceinline__ float swish_res(float v, float y) {
    return v * (1.f / (1.f + expf(-v))) + y;
}

__global__ void swish_residual_vec4(const float4* __restrict__ x, const float4* __restrict__ y,
                                    float4* __restrict__ out, int64_t n4) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        const float4 a = x[i];
        const float4 b = y[i];
        out[i] = make_float4(swish_res(a.x, b.x), swish_res(a.y, b.y), swish_res(a.z, b.z), swish_res(a.w, b.w));
    }
}

__global__ void swish_residual_scalar(const float* __restrict__ x, const float* __restrict__ y,
                                      float* __restrict__ out, int64_t start, int64_t n) {
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = swish_res(x[i], y[i]);
}

torch::Tensor swish_residual(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    TORCH_CHECK(y.device() == x.device() && y.sizes() == x.sizes() && y.scalar_type() == torch::kFloat32,
                "y must match x");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    y = y.contiguous();
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    // one element group per thread up to a large cap; the grid-stride loop covers the rest
    const int64_t max_blocks = 1 << 20;
    const bool aligned = reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(out.data_ptr<float>()) % 16 == 0;
    int64_t done = 0;
    if (aligned) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            const int blocks = (int)std::min<int64_t>((n4 + threads - 1) / threads, max_blocks);
            swish_residual_vec4<<<blocks, threads, 0, stream>>>(
                reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<const float4*>(y.data_ptr<float>()),
                reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (done < n) {  // tail (or everything, if unaligned)
        const int blocks = (int)std::min<int64_t>((n - done + threads - 1) / threads, max_blocks);
        swish_residual_scalar<<<blocks, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                              out.data_ptr<float>(), done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

_CPP = "torch::Tensor swish_residual(torch::Tensor x, torch::Tensor y);"

_ext = load_inline(
    name="kc_cuda_swish_residual",
    cpp_sources=[_CPP],
    cuda_sources=[_CUDA],
    functions=["swish_residual"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return _ext.swish_residual(x, y)
