"""The GEMM shapes a user's model performs: one forward pass on the CPU, on the example inputs the
user's function makes, under a torch dispatch mode that records every matrix product.

A dispatch mode sits below autograd, where `nn.Linear`, `F.linear`, `torch.matmul` (any rank),
`@` and `einsum` have already become the products that run (`mm`, `addmm`, `bmm`, ...), with
batch dimensions flattened into M or kept as the batch of a `bmm`.
"""

from __future__ import annotations

from typing import Any

from .hgemm import Shape
from .loader import TaskError
from .user_module import task_from_module

# The products a forward pass can reach, with the position of A (B follows it): before it,
# the bias of the add- forms.
_PRODUCTS = {"mm": 0, "bmm": 0, "mv": 0, "addmm": 1, "_addmm_activation": 1, "baddbmm": 1, "addmv": 1}


def _gemm_shape(name: str, args: tuple[Any, ...]) -> Shape | None:
    """(M, N, K) of one aten product, by its packet name; None for any other op. A batched
    product (batch x M x K by batch x K x N) is its 2-D GEMM; a matrix-vector product has N = 1."""
    at = _PRODUCTS.get(name)
    if at is None:
        return None
    a, b = args[at], args[at + 1]
    m, k = a.shape[-2:]
    return Shape(int(m), 1 if b.dim() == 1 else int(b.shape[-1]), int(k))


def matmul_shapes(model: str, inputs: str, init_inputs: str | None = None) -> list[Shape]:
    """The distinct GEMM shapes, in first-seen order, of one forward pass of class `model`
    ("path.py:Class") on the inputs `inputs` ("path.py:fn") makes, constructed with the
    arguments `init_inputs` ("path.py:fn") makes, if given. Products with an empty side are
    left out. Raises TaskError (one line) on a bad spec, a failing module, or no product."""
    # torch is imported on use: importing the tasks package stays light.
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from .runtime import exec_module

    task = task_from_module(model, inputs, init_inputs)  # checks the specs, one-line errors
    seen: list[Shape] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            shape = _gemm_shape(func.overloadpacket.__name__, args)
            if shape is not None and min(shape.m, shape.n, shape.k) > 0 and shape not in seen:
                seen.append(shape)
            return func(*args, **(kwargs or {}))

    try:
        module = exec_module(task.source, str(task.path), "kernelcraft_shape_capture")
        net = module.Model(*module.get_init_inputs()).eval()
        args = list(module.get_inputs())
        with torch.no_grad(), Recorder():
            net(*args)
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything; the user gets one line
        first = (str(e).strip().splitlines() or [""])[0]
        raise TaskError(f"{model}: the forward pass on {inputs} failed: {type(e).__name__}: {first}") from None
    if not seen:
        raise TaskError(f"{model}: the forward pass performed no matrix product (mm, addmm, bmm, baddbmm, mv)")
    return seen
