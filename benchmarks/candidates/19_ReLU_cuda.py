# CUDA ReLU for KernelBench level1/19: float4 loads and stores, grid-stride loop.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <algorithm>

__global__ void relu_f4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}

__global__ void relu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int64_t n4 = n / 4;
    if (n4 > 0) {
        int blocks = (int)std::min<int64_t>((n4 + 255) / 256, 132 * 16);
        relu_f4_kernel<<<blocks, 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                        reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    if (n - n4 * 4 > 0) {
        relu_tail_kernel<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    }
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "relu launch failed");
    return y;
}
"""

_ext = load_inline(name="kb19_relu_f4", cpp_sources=["torch::Tensor relu_forward(torch::Tensor x);"],
                   cuda_sources=[_CUDA], functions=["relu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x)
