# Class 17, unbounded memory: forward asks for a 4 TiB buffer and fills it. Allocation fails
# (overcommit heuristics or the judge's RLIMIT_AS), the error escapes forward: runtime_error.
# (One huge request rather than a growing loop, so a judge without a memory rlimit does not
# take the test machine down.)
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        hog = torch.empty(1 << 42, dtype=torch.uint8, device=x.device)
        hog.fill_(1)
        return torch.relu(x) + hog[:1].float() * 0
