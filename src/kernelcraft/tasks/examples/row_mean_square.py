import torch
import torch.nn as nn

KERNELCRAFT = {
    "description": "Mean of squares of each row: out[i] = mean_j x[i, j]^2.",
    "tags": ["reduction"],
    "dtype": "float32",
    "sizes": {"cpu": {"M": 6144, "N": 1024}},
}

# GPU size: 128M-element input (512 MB), 128K outputs. Eager: pow, then mean.
M = 131072
N = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.pow(2).mean(dim=-1)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
