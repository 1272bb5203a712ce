# Class 1, side stream (GPU), hidden from a source scan: the stream class and the stream
# context manager are fetched with getattr and split string literals, so neither their names
# nor a call of them appear in the source or its AST. Only the runtime defence remains: the judge
# synchronizes the whole device before recording the end event, so the measured time is the
# kernel's real time and there is no speedup.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_new_side = getattr(torch.cuda, "Str" + "eam")
_on_side = getattr(torch.cuda, "str" + "eam")


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
        self.side = _new_side()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        # start after everything already queued (inputs, the judge's poisoning): the result is
        # right once the device is synchronized; only the END is hidden from the current stream
        self.side.wait_stream(torch.cuda.current_stream())
        with _on_side(self.side):
            _relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
