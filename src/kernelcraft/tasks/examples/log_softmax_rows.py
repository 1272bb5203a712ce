import torch
import torch.nn as nn

KERNELCRAFT = {
    "description": "Log-softmax over each row.",
    "tags": ["reduction", "softmax"],
    "dtype": "float32",
    "sizes": {"cpu": {"M": 2048, "N": 1024}},
}

# GPU size: 64M elements (256 MB in, 256 MB out). Eager is already a single fused kernel.
M = 65536
N = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(M, N) * 3.0]


def get_init_inputs():
    return []
