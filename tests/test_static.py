from __future__ import annotations

import pytest

from kernelcraft.judge import check_source
from kernelcraft.judge.worker.buildcache import trim_compiler_output

OK = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

src = '''
__global__ void relu_kernel(const float* x, float* y, int n) { }
__global__ __launch_bounds__(256) void other_kernel(float* y) { }
'''

@triton.jit
def add_kernel(x, y, n, B: tl.constexpr):
    pass

class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""


def test_honest_source_passes_and_names_its_kernels() -> None:
    r = check_source(OK)
    assert r.ok, r.message()
    assert r.kernel_names == {"relu_kernel", "other_kernel", "add_kernel"}


@pytest.mark.parametrize("snippet, words", [
    ("import threading", "threading"),
    ("from concurrent.futures import ThreadPoolExecutor", "concurrent"),
    ("import os", "os"),
    ("x = __import__('threading')", "__import__"),
    ("exec('1')", "exec"),
    ("f = open('/etc/passwd')", "open"),
    ("torch.allclose = lambda *a, **k: True", "modules may not be modified"),
    ("import torch.nn.functional as F\nF.relu = None", "modules may not be modified"),
    ("setattr(torch, 'matmul', None)", "setattr"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "modules may not be modified"),
    ("torch.set_float32_matmul_precision('high')", "pins matmul precision"),
    ("f = torch.compile(lambda x: x)", "torch.compile"),
    ("fut = torch.jit.fork(abs, 1)", "asynchronous"),
    ("g = torch.__dict__", "__dict__"),
    ("try:\n    pass\nexcept Exception:\n    pass", "try/except"),
    ("s = '#include <thread>\\nvoid f() { std::thread t([]{}); }'", "native threads"),
    ("s = 'int main() { return fork(); } // padding padding'", "process or system calls"),
])
def test_banned_constructs_are_rejected_with_a_line(snippet: str, words: str) -> None:
    src = "import torch\nimport torch.nn as nn\n" + snippet + "\nclass ModelNew(nn.Module):\n    pass\n"
    r = check_source(src)
    assert not r.ok
    assert words in r.message() and "line " in r.message()


PARALLEL = '''
import torch.nn as nn
src = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
void scale(float* x, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) x[i] *= 2;
    at::parallel_for(0, n, 4096, [&](int64_t b, int64_t e) { for (int64_t i = b; i < e; ++i) x[i] += 1; });
}
"""
class ModelNew(nn.Module):
    pass
'''


def test_openmp_and_parallel_for_are_allowed_in_native_source() -> None:
    r = check_source(PARALLEL)
    assert r.ok, r.message()


@pytest.mark.parametrize("code, words", [
    ("std::jthread t([]{});", "native threads"),
    ("pthread_create(&t, nullptr, f, nullptr);", "native threads"),
    ("auto f = std::async(std::launch::async, g);", "native threads"),
    ("std::for_each(std::execution::par, x, x + n, g);", "native threads"),
    ('std::system("ls");', "process or system calls"),
])
def test_threads_of_ones_own_are_still_rejected_beside_openmp(code: str, words: str) -> None:
    r = check_source(PARALLEL.replace("at::parallel_for", code + "\n    at::parallel_for"))
    assert not r.ok and words in r.message()


def test_fallbacks_to_the_reference_are_rejected() -> None:
    inherit = "import torch.nn as nn\nclass Model(nn.Module): pass\nclass ModelNew(Model): pass\n"
    sup = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return super().forward(x)\n"
    assert "inherit" in check_source(inherit).message()
    assert "super().forward" in check_source(sup).message()


def test_syntax_error_and_missing_model_new() -> None:
    r = check_source("import torch\ndef f(:\n")
    assert not r.ok and "line 2" in r.message() and "syntax error" in r.message()
    assert "no class ModelNew" in check_source("import torch\n").message()


def test_streams_are_flagged_not_rejected() -> None:
    r = check_source("import torch\nimport torch.nn as nn\ns = torch.cuda.Stream()\nclass ModelNew(nn.Module): pass\n")
    assert r.ok
    assert [code for code, _ in r.flags] == ["side_stream"]


def test_rules_can_be_switched_off_for_defence_in_depth_tests() -> None:
    r = check_source("import threading\nimport torch.nn as nn\nclass ModelNew(nn.Module): pass\n", enforce=False)
    assert r.ok


def test_compiler_output_is_trimmed_to_the_errors() -> None:
    log = "\n".join([
        "[1/3] /usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=kc_x -isystem /torch/include " + "-O3 " * 400,
        "FAILED: cuda.cuda.o",
        "/usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=kc_x -isystem /torch/include -c cuda.cu -o cuda.cuda.o",
        "cuda.cu(12): error: expected a \";\"",
        "      return y",
        "               ^",
        "1 error detected in the compilation of \"cuda.cu\".",
        "ninja: build stopped: subcommand failed.",
    ])
    text = trim_compiler_output(log)
    assert text.startswith('cuda.cu(12): error: expected a ";"') and "return y" in text
    assert "-isystem" not in text and "FAILED" not in text and "ninja" not in text
