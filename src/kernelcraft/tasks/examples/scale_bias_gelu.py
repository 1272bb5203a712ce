import torch
import torch.nn as nn
import torch.nn.functional as F

KERNELCRAFT = {
    "description": "Scale by a constant, add a per-column bias and apply GELU (tanh approximation), elementwise.",
    "tags": ["elementwise", "fusion"],
    "dtype": "float32",
    "sizes": {"cpu": {"M": 1024, "D": 1024}},
}

# GPU size: 64M elements (256 MB in, 256 MB out). Eager runs 3 kernels (mul, add, gelu).
M = 16384
D = 4096
SCALE = 1.7


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, bias):
        # x: (M, D), bias: (D,) broadcast over rows
        return F.gelu(x * self.scale + bias, approximate="tanh")


def get_inputs():
    return [torch.randn(M, D), torch.randn(D) * 0.5]


def get_init_inputs():
    return [SCALE]
