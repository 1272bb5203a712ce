# Class 29, judge state tampering: poisons another candidate's build. At import it works out the
# build-cache key of the honest C++ ReLU (honest_relu_cpp.py: its load_inline arguments, keyed by
# the judge's own function) and plants, in that key's directory of the shared build cache, a
# failed.log (the judge's record that this build failed: the honest candidate would then fail at
# once, "failed the same way before") and, where there is none yet, a fake shared object. Its own
# ReLU is honest. Defences: static bans (os, open, exec); only the judge publishes builds, and a
# build is used only when its directory, record and files are the judge's and match the SHA-256 it
# recorded, so the planted files are ignored and replaced; later, a cache the worker cannot write.
import inspect
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

import kernelcraft
from kernelcraft.judge.worker import buildcache

_VICTIM = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kernelcraft.__file__)))),
                       "tests", "redteam", "candidates", "honest_relu_cpp.py")


def _victim_arguments():
    """The honest candidate's load_inline arguments: its module run with load_inline recorded."""
    seen = {}

    def record(**kwargs):
        seen.update(kwargs)

    with open(_VICTIM) as f:
        source = f.read().replace("from torch.utils.cpp_extension import load_inline", "")
    exec(compile(source, _VICTIM, "exec"), {"__name__": "victim", "load_inline": record})
    return seen


def _victim_key(arguments):
    parameters = inspect.signature(buildcache.cache_key).parameters
    if "arch" in parameters:  # this judge: its key of a CPU build for this process's architectures, as the victim's
        return buildcache.cache_key(buildcache.request_arguments(arguments), "", buildcache.arch_list())
    if "capability" in parameters:  # judges 11 to 16
        return buildcache.cache_key(buildcache.request_arguments(arguments), "")
    return buildcache.cache_key(arguments)[:24]  # judges before them


def _plant():
    builds = os.path.join(os.path.dirname(os.environ["TORCH_EXTENSIONS_DIR"]), "builds")
    name = "kc_" + _victim_key(_victim_arguments())
    where = os.path.join(builds, name)
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "failed.log"), "w") as f:
        f.write("main.cpp:1:1: error: planted by 29_plant_failed_build")
    library = os.path.join(where, name + ".so")
    if not os.path.exists(library):
        with open(library, "wb") as f:
            f.write(b"\x7fELF planted by 29_plant_failed_build")


_plant()


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask, other=0.0), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 1 << 16
        _relu_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
        return out
