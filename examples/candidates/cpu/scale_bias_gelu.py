# CPU candidate: scale, bias add and tanh-GELU fused into one C++ loop over rows
# (eager makes three passes over memory and allocates two intermediates).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <cstring>

// exp(x) the Cephes way (2^n * polynomial, ~1 ulp): unlike std::exp it is inlined, so the loop
// below vectorizes. Input clamped to the range where the 2^n bit trick is valid.
static inline float exp_poly(float x) {
    x = std::min(std::max(x, -87.0f), 88.0f);
    const float n = std::nearbyint(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f;  // ln2 split in two for an exact range reduction
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

torch::Tensor scale_bias_gelu(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(bias.scalar_type() == torch::kFloat32 && bias.dim() == 1, "1-d float32 bias expected");
    x = x.contiguous();
    bias = bias.contiguous();
    const int64_t d = bias.numel();
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == d, "bias length must match the last dim of x");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float s = (float)scale;
    // same formula and constants as PyTorch's gelu(approximate="tanh")
    const float kBeta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5);
    const float kKappa = 0.044715f;
    const int64_t rows = d == 0 ? 0 : x.numel() / d;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xi = in + r * d;
        float* oi = o + r * d;
        for (int64_t j = 0; j < d; ++j) {
            const float v = xi[j] * s + b[j];
            const float inner = kBeta * (v + kKappa * v * v * v);
            // tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7, saturates correctly
            const float t = 1.f - 2.f / (exp_poly(2.f * inner) + 1.f);
            oi[j] = 0.5f * v * (1.f + t);
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="kc_cpu_scale_bias_gelu",
    cpp_sources=[_CPP],
    functions=["scale_bias_gelu"],
    # -march=native: the extension is built on the machine that runs it; without it GCC
    # only has SSE2 and leaves these loops scalar and branchy (several times slower)
    # -fno-trapping-math: GCC will not if-convert a select whose arm could raise a floating-point
    # exception, so without it the loop stays scalar and branchy (0.17x eager on an EPYC VM); no result changes
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math"],
)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, bias):
        return _ext.scale_bias_gelu(x, bias, self.scale)
