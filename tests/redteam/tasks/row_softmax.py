"""Red-team task: softmax over each row, through torch.nn.functional (so F can be patched)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

# Rows of 256: outputs average 1/256 ~ 4e-3, well above the 1e-4 absolute tolerance.
ROWS = 8192
COLS = 256
KERNELCRAFT = {
    "description": "Row softmax of a 2-D tensor (red-team target).",
    "dtype": "float32",
    "sizes": {"cuda": {"ROWS": 262144, "COLS": 256}},
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS) * 2.0]


def get_init_inputs():
    return []
