import torch
import torch.nn as nn
import torch.nn.functional as F

KERNELCRAFT = {
    "description": "Linear layer (x @ W^T + b) followed by exact (erf) GELU.",
    "tags": ["gemm", "fusion"],
    "dtype": "float32",
    "sizes": {"cpu": {"BATCH": 256, "IN_FEATURES": 512, "OUT_FEATURES": 512}},
}

# GPU size: a 4096^3 fp32 GEMM (137 GFLOP, no TF32) plus the epilogue.
BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
