# Honest control with an algebraic shortcut: (A @ B).sum(1) == A @ (B.sum(1)).
# Two small Triton kernels: bsum[k] = sum_n B[k, n], then out[m] = sum_k A[m, k] * bsum[k].
# O(M*K + K*N) work instead of the reference's 2*M*N*K FLOPs: correct, and legitimately
# far below the reference's FLOP floor (the judge must flag below_flop_floor, not reject).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, rows, cols, stride,
                    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        mask = (r[:, None] < rows) & (c[None, :] < cols)
        x = tl.load(x_ptr + r[:, None] * stride + c[None, :], mask=mask, other=0.0)
        acc += tl.sum(x, axis=1)
    tl.store(out_ptr + r, acc, mask=r < rows)


@triton.jit
def _matvec_kernel(a_ptr, v_ptr, out_ptr, rows, cols, stride,
                   BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        mask = (r[:, None] < rows) & (c[None, :] < cols)
        a = tl.load(a_ptr + r[:, None] * stride + c[None, :], mask=mask, other=0.0)
        v = tl.load(v_ptr + c, mask=c < cols, other=0.0)
        acc += tl.sum(a * v[None, :], axis=1)
    tl.store(out_ptr + r, acc, mask=r < rows)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        _, N = b.shape
        bsum = torch.empty((K,), device=b.device, dtype=torch.float32)
        out = torch.empty((M,), device=a.device, dtype=torch.float32)
        br, bc = (16, 256) if a.is_cuda else (512, 512)
        _row_sum_kernel[(triton.cdiv(K, br),)](b, bsum, K, N, b.stride(0), BLOCK_R=br, BLOCK_C=bc)
        _matvec_kernel[(triton.cdiv(M, br),)](a, bsum, out, M, K, a.stride(0), BLOCK_R=br, BLOCK_C=bc)
        return out
