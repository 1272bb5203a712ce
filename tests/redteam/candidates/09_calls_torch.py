# Class 9, the bare fallback: forward computes ReLU with a torch op (clamp_min, so not even
# the reference's op name appears) and has no custom kernel at all. Nothing for the static
# layer to see.
# Defence: coverage: zero custom launches during forward (hack_detected).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
