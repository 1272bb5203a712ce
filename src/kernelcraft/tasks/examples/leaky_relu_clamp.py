import torch
import torch.nn as nn
import torch.nn.functional as F

KERNELCRAFT = {
    "description": "LeakyReLU (slope 0.1) followed by clamping to [-0.25, 1.5], elementwise.",
    "tags": ["elementwise", "fusion"],
    "dtype": "float32",
    "sizes": {"cpu": {"N": 4194304}},
}

# GPU size: 64M elements (256 MB in, 256 MB out). Eager: leaky_relu, clamp.
N = 1 << 26
SLOPE = 0.1
LOW = -0.25
HIGH = 1.5


class Model(nn.Module):
    def __init__(self, slope, low, high):
        super().__init__()
        self.slope = slope
        self.low = low
        self.high = high

    def forward(self, x):
        return torch.clamp(F.leaky_relu(x, self.slope), self.low, self.high)


def get_inputs():
    # scaled so that all three regions (negative slope, identity, clamped) are hit
    return [torch.randn(N) * 2.0]


def get_init_inputs():
    return [SLOPE, LOW, HIGH]
