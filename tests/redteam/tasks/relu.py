"""Red-team task: elementwise ReLU (memory bound: one read, one write per element)."""
import torch
import torch.nn as nn

# Module constants are the CPU size (~1 ms single-thread eager); the judge overwrites them
# with KERNELCRAFT["sizes"][device] before calling get_inputs(). GPU: 256M elements (1 GiB
# in, 1 GiB out, ~0.5 ms at ~4 TB/s).
BATCH = 1024
DIM = 2048
KERNELCRAFT = {
    "description": "ReLU of a 2-D tensor (red-team target).",
    "dtype": "float32",
    "sizes": {"cuda": {"BATCH": 16384, "DIM": 16384}},
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
