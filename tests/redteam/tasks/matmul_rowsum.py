"""Red-team task: (A @ B).sum(dim=1), which has an honest algebraic shortcut.

(A @ B).sum(1) == A @ B.sum(1): O(M*K + K*N) instead of O(M*N*K). A correct candidate using
it runs far below the FLOP floor computed from the reference (2*M*N*K): the judge must flag
that (below_flop_floor), not reject it. Inputs are uniform [0, 1) so that all row sums are
large and positive: two summation orders then agree to ~1e-6 relative (with randn, rows
summing to near zero would make any reordering fail atol = 1e-4 at the GPU size).
"""
import torch
import torch.nn as nn

M = 384
K = 384
N = 384
KERNELCRAFT = {
    "description": "Row sums of a matrix product (red-team target with an algebraic shortcut).",
    "dtype": "float32",
    # Wide and shallow: the FLOP floor (2MNK over the bf16 peak) grows with M*N*K while the shortcut
    # reads only M*K + K*N elements, so the shortcut lands several times under the floor on any
    # Hopper (at 4096^3 it sat just above the floor on an H100).
    "sizes": {"cuda": {"M": 8192, "K": 2048, "N": 8192}},
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b).sum(dim=1)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
