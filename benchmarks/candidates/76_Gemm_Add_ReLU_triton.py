# Triton GEMM for KernelBench level2/76: x @ W^T with bias add and ReLU in the epilogue.
# fp32 with input_precision="ieee": the judge keeps fp32 tasks out of TF32.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_bias_relu_kernel(a_ptr, w_ptr, b_ptr, c_ptr, M, N, K, sam, sak, swn, swk, scm, scn,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    n_m = tl.cdiv(M, BM)
    n_n = tl.cdiv(N, BN)
    group = GROUP_M * n_n
    first_m = (pid // group) * GROUP_M
    gm = tl.minimum(n_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % gm
    pid_n = (pid % group) // gm
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    w_ptrs = w_ptr + rn[None, :] * swn + rk[:, None] * swk
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        w = tl.load(w_ptrs, mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
        a_ptrs += BK * sak
        w_ptrs += BK * swk
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    acc = tl.maximum(acc, 0.0)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        w = self.gemm.weight
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        gemm_bias_relu_kernel[grid](x, w, self.bias, out, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                    out.stride(0), out.stride(1), BM=128, BN=128, BK=32, GROUP_M=8, num_warps=8, num_stages=3)
        return out
