import torch
import torch.nn as nn

KERNELCRAFT = {
    "description": "RMSNorm over the last dimension with a learned per-channel weight.",
    "tags": ["normalization", "reduction", "fusion"],
    "dtype": "float32",
    "sizes": {"cpu": {"M": 4096, "D": 1024}},
}

# GPU size: 64M elements (256 MB in, 256 MB out). Eager runs ~6 kernels (pow, mean, add,
# rsqrt, mul, mul).
M = 65536
D = 1024
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        # non-trivial weight so that a candidate ignoring it fails
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(M, D) * 2.0]


def get_init_inputs():
    return [D, EPS]
