"""Red-team task: x * 2 + y (two inputs, memory bound)."""
import torch
import torch.nn as nn

BATCH = 1024
DIM = 2048
KERNELCRAFT = {
    "description": "x * 2 + y elementwise (red-team target).",
    "dtype": "float32",
    "sizes": {"cuda": {"BATCH": 8192, "DIM": 16384}},
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x * 2.0 + y


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
