# Triton candidate: softmax(x / T) with each row loaded once into registers (one read, one
# write per element; eager runs a division kernel plus a softmax kernel). Works on CUDA and,
# through Triton's interpreter (TRITON_INTERPRET=1), on CPU tensors.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_rows, n_cols, temperature, stride_x, stride_out,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    col_ok = cols < n_cols
    rows64 = rows.to(tl.int64)
    mask = row_ok[:, None] & col_ok[None, :]
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    # padding columns get -inf so they add exp(-inf) = 0; padding rows stay finite (no NaN)
    x = tl.where(col_ok[None, :], x / temperature, float("-inf"))
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    s = tl.sum(e, axis=1)
    y = e / s[:, None]
    tl.store(out_ptr + rows64[:, None] * stride_out + cols[None, :], y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        out = torch.empty_like(x2)
        block_n = triton.next_power_of_2(n_cols)
        if block_n > 16384:
            raise ValueError("rows longer than 16384 are not supported by this kernel")
        # GPU: ~4K elements per program; interpreter: big programs, since it runs them one by one
        block_m = max(1, (4096 if x.is_cuda else 65536) // block_n)
        grid = (triton.cdiv(x2.shape[0], block_m),)
        _softmax_kernel[grid](x2, out, x2.shape[0], n_cols, self.temperature, x2.stride(0), out.stride(0),
                              BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
        return out.view(x.shape)
