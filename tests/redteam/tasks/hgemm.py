"""Red-team task: an fp16 GEMM, C = A @ B, as the hgemm suite builds them, asking the judge for
the GEMM checks (inputs of 0s and 1s compared exactly; guard zones around inputs and output).

M = 192 is not a multiple of a 128-row tile, so a kernel that does not mask its stores writes
64 rows past the end of C. K = 1024: with 0/1 inputs the exact sums reach a few hundred, past
256, where bf16 can no longer hold every integer.
"""
import torch
import torch.nn as nn

M = 192
N = 256
K = 1024
KERNELCRAFT = {
    "description": "fp16 matrix multiplication with the GEMM checks (red-team target).",
    "dtype": "float16",
    "tags": ["hgemm", "gemm"],
    "checks": ["binary_exact", "guard_zones"],
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
