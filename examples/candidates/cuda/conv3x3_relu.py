# Triton candidate: 3x3 conv (stride 1, pad 1, NCHW) as an implicit GEMM: rows = output pixels,
# columns = output channels, reduction = input channels x 9 taps, gathered straight from x
# (no im2col buffer). Bias + ReLU are fused into the epilogue. fp32, input_precision="ieee".
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv3x3_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_pix, C_in, H, W, C_out,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    HW = H * W
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # flattened (n, oh, ow)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel
    offs_k = tl.arange(0, BLOCK_K)                                # input channel (within a chunk)
    m_ok = offs_m < n_pix
    n_ok = offs_n < C_out
    img = (offs_m // HW).to(tl.int64)
    pix = offs_m % HW
    oh = pix // W
    ow = pix % W
    x_img = x_ptr + img * C_in * HW
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # taps as a runtime loop (not static_range): unrolling all 9 ran out of registers
    for tap in range(9):
        kh = tap // 3
        kw = tap % 3
        ih = oh + (kh - 1)
        iw = ow + (kw - 1)
        # zero padding: out-of-image taps are masked loads returning 0
        tap_ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a_base = x_img + ih * W + iw
        for c0 in range(0, C_in, BLOCK_K):
            c = c0 + offs_k
            c_ok = c < C_in
            a = tl.load(a_base[:, None] + c[None, :] * HW, mask=tap_ok[:, None] & c_ok[None, :], other=0.0)
            # weight[co, c, kh, kw] of a contiguous (C_out, C_in, 3, 3) tensor
            w = tl.load(w_ptr + offs_n[None, :] * (C_in * 9) + c[:, None] * 9 + tap,
                        mask=c_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, w, acc, input_precision="ieee")
    bias = tl.load(b_ptr + offs_n, mask=n_ok, other=0.0)
    acc = tl.maximum(acc + bias[None, :], 0.0)
    out_ptrs = out_ptr + img[:, None] * C_out * HW + offs_n[None, :] * HW + pix[:, None]
    tl.store(out_ptrs, acc, mask=m_ok[:, None] & n_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        # same module as the reference, so seeded init and load_state_dict both match
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.contiguous()
        b = self.conv.bias.contiguous()
        nb, c_in, h, wd = x.shape
        c_out = w.shape[0]
        out = torch.empty((nb, c_out, h, wd), dtype=x.dtype, device=x.device)
        n_pix = nb * h * wd
        bn = min(128, max(16, triton.next_power_of_2(c_out)))
        if x.is_cuda:
            # 64 pixels x up to 128 channels x 32: largest tile that compiles for sm_90 without spills
            bm, bk = 64, 32
        else:
            # Triton interpreter on CPU: few, big programs
            bm, bk = 1024, min(128, max(16, triton.next_power_of_2(c_in)))
        grid = (triton.cdiv(n_pix, bm), triton.cdiv(c_out, bn))
        _conv3x3_relu_kernel[grid](x, w, b, out, n_pix, c_in, h, wd, c_out,
                                   BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8, num_stages=2)
        return out
