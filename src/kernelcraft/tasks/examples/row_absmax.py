import torch
import torch.nn as nn

KERNELCRAFT = {
    "description": "Maximum absolute value of each row (as used to pick a quantization scale).",
    "tags": ["reduction"],
    "dtype": "float32",
    "sizes": {"cpu": {"M": 6144, "N": 1024}},
}

# GPU size: 128M-element input (512 MB), 128K outputs. Eager: abs, then amax.
M = 131072
N = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.abs().amax(dim=-1)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
