import math

import torch
import torch.nn as nn

KERNELCRAFT = {
    "description": "Attention probabilities: softmax(Q @ K^T / sqrt(head_dim)) over the key axis.",
    "tags": ["gemm", "softmax", "attention", "fusion"],
    "dtype": "float32",
    "sizes": {"cpu": {"BATCH": 2, "HEADS": 4, "SEQ": 512, "HEAD_DIM": 32}},
}

# GPU size: Q, K (16, 16, 512, 64) = 32 MB each; output (16, 16, 512, 512) = 256 MB.
# Eager: batched matmul, scale, softmax. SEQ stays 512 so that probabilities (~2e-3 on
# average) are well above the 1e-4 absolute tolerance.
BATCH = 16
HEADS = 16
SEQ = 512
HEAD_DIM = 64


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    q = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    k = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    return [q, k]


def get_init_inputs():
    return [HEAD_DIM]
