"""Red-team task (class 12, degenerate): the output is identically zero for every input.

relu(-|x|) is 0 everywhere, so a candidate that returns zeros without reading x passes any
correctness check. The defence is task vetting (`kernelcraft tasks vet` must flag this file:
outputs do not vary across seeds / input distributions, and all-zeros passes the tolerance).
"""
import torch
import torch.nn as nn

BATCH = 512
DIM = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(-torch.abs(x))


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
