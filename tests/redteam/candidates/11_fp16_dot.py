# Class 11, lower precision: the fp32 matmul rounds A and B tiles to fp16 before tl.dot
# (fp32 accumulation). Twice the tensor-core rate and half the operand bytes on a GPU; errors
# of ~1e-3 absolute on this task, which KernelBench's default tolerance (atol = rtol = 1e-2)
# accepts. Defence: tolerance per dtype (fp32: 1e-4) (incorrect).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul_fp16_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a.to(tl.float16), b.to(tl.float16), out_dtype=tl.float32)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        if a.is_cuda:
            bm, bn, bk = 128, 128, 32
        else:
            bm, bn, bk = min(512, triton.next_power_of_2(M)), min(512, triton.next_power_of_2(N)), 64
        _matmul_fp16_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
        return c
