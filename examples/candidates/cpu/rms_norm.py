# CPU candidate: RMSNorm in one C++ pass per row: the row (4 KB at D=1024) stays in L1 between
# the sum of squares and the scaling, instead of eager's ~6 full-tensor passes.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32 && weight.dim() == 1, "1-d float32 weight expected");
    x = x.contiguous();
    weight = weight.contiguous();
    const int64_t d = weight.numel();
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == d, "weight length must match the last dim of x");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    const float* w = weight.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t rows = d == 0 ? 0 : x.numel() / d;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xi = in + r * d;
        float* oi = o + r * d;
        // 16 independent float partial sums (short chains, vectorizable without -ffast-math),
        // combined in double: at least as accurate as eager's cascaded float sum
        float part[16] = {0.f};
        int64_t j = 0;
        for (; j + 16 <= d; j += 16)
            for (int k = 0; k < 16; ++k) part[k] += xi[j + k] * xi[j + k];
        double acc = 0.0;
        for (; j < d; ++j) acc += (double)xi[j] * (double)xi[j];
        for (int k = 0; k < 16; ++k) acc += (double)part[k];
        const float mean = (float)(acc / (double)d);
        const float inv = 1.f / std::sqrt(mean + (float)eps);
        // same rounding order as eager: (x * rms) * weight
        for (j = 0; j < d; ++j) oi[j] = (xi[j] * inv) * w[j];
    }
    return out;
}
"""

_ext = load_inline(
    name="kc_cpu_rms_norm",
    cpp_sources=[_CPP],
    functions=["rms_norm"],
    # -march=native: the extension is built on the machine that runs it; without it GCC
    # only has SSE2 and leaves these loops scalar and branchy (several times slower)
    # -fno-trapping-math: GCC will not if-convert a select whose arm could raise a floating-point
    # exception, so without it the loop stays scalar and branchy (0.17x eager on an EPYC VM); no result changes
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math"],
)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        # created exactly like the reference so seeded init / load_state_dict give equal weights
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return _ext.rms_norm(x, self.weight, self.eps)
