# Triton candidate: mean of squares per row in one read of x (eager writes x**2 to memory and
# reads it back). Accumulates in fp32 per lane, then a tree sum across the row.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_mean_square_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    row_ptr = x_ptr + rows.to(tl.int64)[:, None] * stride_x
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(row_ptr + cols[None, :], mask=row_ok[:, None] & (cols[None, :] < n_cols), other=0.0)
        acc += x * x
    total = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, total / n_cols, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        n_rows = x2.shape[0]
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        block_n = min(triton.next_power_of_2(n_cols), 1024)
        # GPU: 4K elements per program; interpreter: fewer, bigger programs
        block_m = max(1, (4096 if x.is_cuda else 65536) // block_n)
        grid = (triton.cdiv(n_rows, block_m),)
        _row_mean_square_kernel[grid](x2, out, n_rows, n_cols, x2.stride(0),
                                      BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
        return out.view(x.shape[:-1])
