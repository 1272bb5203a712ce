# Triton candidate: tiled GEMM (x @ W^T) with bias + exact GELU fused into the epilogue, so the
# GEMM output never round-trips through memory. fp32 inputs with input_precision="ieee": no TF32,
# which would miss the 1e-4 tolerance.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_gelu_kernel(a_ptr, w_ptr, b_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr):
    # grouped tile order: neighbouring programs reuse the same W tiles from L2
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group_size = GROUP_M * num_pid_n
    first_m = (pid // group_size) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size) % group_m
    pid_n = (pid % group_size) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    w_ptrs = w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None] * stride_wk  # W^T tile [K, N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_ok[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=k_ok[:, None] & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk

    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = acc + bias[None, :]
    # exact GELU, same formula as F.gelu(approximate="none"): 0.5 * x * (1 + erf(x / sqrt(2)))
    acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        # same module as the reference, so seeded init and load_state_dict both match
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w = self.linear.weight.contiguous()
        b = self.linear.bias.contiguous()
        x2 = x.contiguous().view(-1, x.shape[-1])
        M, K = x2.shape
        N = w.shape[0]
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        # 128x128x16 tiles, 2 stages: fits sm_90 registers with the erf epilogue (checked offline;
        # BLOCK_K=32 or 3 stages spill)
        # (the Triton interpreter on CPU prefers a deep BLOCK_K: fewer steps)
        bm, bn, bk = 128, 128, (16 if x.is_cuda else 128)
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _linear_gelu_kernel[grid](x2, w, b, out, M, N, K,
                                  x2.stride(0), x2.stride(1), w.stride(0), w.stride(1),
                                  out.stride(0), out.stride(1),
                                  BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                  num_warps=8, num_stages=2)
        return out.view(*x.shape[:-1], N)
