# Triton candidate: log-softmax with each row held in registers. Eager is already one fused
# kernel here, so this is expected to be about as fast as eager on GPU, not faster.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _log_softmax_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < n_cols
    rows64 = rows.to(tl.int64)
    mask = row_ok[:, None] & col_ok[None, :]
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = tl.where(col_ok[None, :], x, float("-inf"))
    m = tl.max(x, axis=1)
    shifted = x - m[:, None]
    # same form as PyTorch: (x - max) - log(sum(exp(x - max)))
    lse = tl.log(tl.sum(tl.exp(shifted), axis=1))
    y = shifted - lse[:, None]
    tl.store(out_ptr + rows64[:, None] * stride_out + cols[None, :], y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        out = torch.empty_like(x2)
        block_n = triton.next_power_of_2(n_cols)
        if block_n > 16384:
            raise ValueError("rows longer than 16384 are not supported by this kernel")
        block_m = max(1, (4096 if x.is_cuda else 65536) // block_n)
        grid = (triton.cdiv(x2.shape[0], block_m),)
        _log_softmax_kernel[grid](x2, out, x2.shape[0], n_cols, x2.stride(0), out.stride(0),
                                  BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
        return out.view(x.shape)
