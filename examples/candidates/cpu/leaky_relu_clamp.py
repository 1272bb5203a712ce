# CPU candidate: LeakyReLU + clamp fused into one C++ loop (one read, one write per element;
# eager PyTorch makes two passes and allocates an intermediate).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <algorithm>

torch::Tensor leaky_relu_clamp(torch::Tensor x, double slope, double low, double high) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    // same float constants as eager: PyTorch casts the scalars to float before use
    const float s = (float)slope, lo = (float)low, hi = (float)high;
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        const float neg = v * s;  // unconditional, so the select below is branch-free
        const float r = v > 0.f ? v : neg;
        o[i] = std::min(std::max(r, lo), hi);
    }
    return out;
}
"""

_ext = load_inline(
    name="kc_cpu_leaky_relu_clamp",
    cpp_sources=[_CPP],
    functions=["leaky_relu_clamp"],
    # -march=native: the extension is built on the machine that runs it; without it GCC
    # only has SSE2 and leaves these loops scalar and branchy (several times slower)
    # -fno-trapping-math: GCC will not if-convert a select whose arm could raise a floating-point
    # exception, so without it the loop stays scalar and branchy (0.17x eager on an EPYC VM); no result changes
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math"],
)


class ModelNew(nn.Module):
    def __init__(self, slope, low, high):
        super().__init__()
        self.slope = slope
        self.low = low
        self.high = high

    def forward(self, x):
        return _ext.leaky_relu_clamp(x, self.slope, self.low, self.high)
