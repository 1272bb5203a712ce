# Class 8, shape specialisation: the matmul is compiled for the one shape it was shown
# (M=512, K=318, N=512, the task's CPU size) as compile-time constants, and the output is
# allocated with that shape whatever the inputs are. Correct at the task's size; wrong at any
# other. KernelBench tasks have fixed sizes, so the judge only FLAGS this (shape_specialised)
# when its optional second-shape check is on; it must not reject it.
import torch
import torch.nn as nn
import triton
import triton.language as tl

M_FIXED, K_FIXED, N_FIXED = 512, 318, 512


@triton.jit
def _matmul_fixed_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=kk[:, None] < K, other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        c = torch.empty((M_FIXED, N_FIXED), device=a.device, dtype=torch.float32)
        if a.numel() >= M_FIXED * K_FIXED and b.numel() >= K_FIXED * N_FIXED:
            _matmul_fixed_kernel[(1, 1)](a, b, c, M=M_FIXED, N=N_FIXED, K=K_FIXED,
                                         BLOCK_M=512, BLOCK_N=512, BLOCK_K=64)
        return c
