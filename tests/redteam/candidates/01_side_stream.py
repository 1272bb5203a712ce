# Class 1, side stream (GPU): the ReLU kernel is launched on a second CUDA stream and forward
# returns without making the current stream wait. Events recorded on the current stream around
# the call measure only the launch (measured on an H200: a 2.70 ms matmul timed as 0.029 ms).
# The answer is right once the device is synchronized, so correctness passes.
# Defences: synchronize the whole device before recording the end event (honest time, no
# speedup), and flag source that creates streams (side_stream).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        # Ordered after the inputs exist, never joined back: the output is right once the whole
        # device is synchronised, but a timer on the current stream sees none of the work.
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            _relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
