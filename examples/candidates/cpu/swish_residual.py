# CPU candidate: x * sigmoid(x) + y in a single C++ loop (eager: three passes, two temporaries).
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

torch::Tensor swish_residual(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(y.sizes() == x.sizes() && y.scalar_type() == torch::kFloat32, "y must match x");
    x = x.contiguous();
    y = y.contiguous();
    auto out = torch::empty_like(x);
    const float* a = x.data_ptr<float>();
    const float* b = y.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = a[i];
        const float sig = 1.f / (1.f + exp_poly(-v));
        o[i] = v * sig + b[i];
    }
    return out;
}
"""

_ext = load_inline(
    name="kc_cpu_swish_residual",
    cpp_sources=[_CPP],
    functions=["swish_residual"],
    # -march=native: the extension is built on the machine that runs it; without it GCC
    # only has SSE2 and leaves these loops scalar and branchy (several times slower)
    # -fno-trapping-math: GCC will not if-convert a select whose arm could raise a floating-point
    # exception, so without it the loop stays scalar and branchy (0.17x eager on an EPYC VM); no result changes
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return _ext.swish_residual(x, y)
