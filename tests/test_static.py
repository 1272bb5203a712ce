"""The static checker (judge/static.py) applies the table of judge/static_rules.py: every item of every rule,
with the rule's reason; the part of os a build needs, and try, pass; the seven replies judge 16 lost to the
static stage (issue 45) pass it."""

from __future__ import annotations

import pytest

from kernelcraft.judge import check_source
from kernelcraft.judge.static_rules import (ASSIGN_TO_MODULE, INHERIT_MODEL, OS_BEYOND, RELATIVE_IMPORT, RULES,
                                            STATIC_RULES, SUPER_FORWARD, StaticRule)
from kernelcraft.judge.worker.buildcache import trim_compiler_output

from .conftest import CORPUS

# The replies of the lost turns (CORPUS/lost-turns/README.md) that judge 16 rejected statically.
LOST_TO_STATIC = ["level1_3_Batched_matrix_multiplication_turn3.py",
                  "level1_56_conv_standard_2D__asymmetric_input__asymmetric_kernel_turn3.py",
                  "level2_22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish_turn3.py",
                  "level2_41_Gemm_BatchNorm_GELU_ReLU_turn2.py", "level2_54_Conv2d_Multiply_LeakyReLU_GELU_turn3.py",
                  "level3_11_VGG16_turn2.py", "level3_43_MinGPTCausalAttention_turn2.py"]

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
    ("import threading", "import of threading: threads, processes"),
    ("from concurrent.futures import ThreadPoolExecutor", "import from concurrent.futures"),
    ("import subprocess", "import of subprocess: processes, signals"),
    ("x = __import__('threading')", "__import__: code comes from"),
    ("exec('1')", "exec"),
    ("f = open('/etc/passwd')", "open: processes, signals, sockets, system calls and files"),
    ("torch.allclose = lambda *a, **k: True", "assignment to torch.allclose: the modules"),
    ("import torch.nn.functional as F\nF.relu = None", "assignment to F.relu"),
    ("setattr(torch, 'matmul', None)", "setattr"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "the judge pins matmul precision and TF32"),
    ("torch.set_float32_matmul_precision('high')", "pins matmul precision"),
    ("f = torch.compile(lambda x: x)", "torch.compile: PyTorch's compiler"),
    ("import torch._dynamo", "import of torch._dynamo"),
    ("fut = torch.jit.fork(abs, 1)", "asynchronous"),
    ("g = torch.__dict__", "__dict__: introspection"),
    ("from . import helpers", "relative import (from .)"),
    ("s = '#include <thread>\\nvoid f() { std::thread t([]{}); }'", "in native source: threads"),
    ("s = 'int main() { return fork(); } // padding padding'", "fork( in native source: processes"),
])
def test_banned_constructs_are_rejected_with_a_line(snippet: str, words: str) -> None:
    src = "import torch\nimport torch.nn as nn\n" + snippet + "\nclass ModelNew(nn.Module):\n    pass\n"
    r = check_source(src)
    assert not r.ok
    assert words in r.message() and "line " in r.message()


CONSTRUCTS = {ASSIGN_TO_MODULE: "torch.relu = None", RELATIVE_IMPORT: "from .helpers import f", OS_BEYOND: "import os\nos.system('true')",
              INHERIT_MODEL: "class Model(nn.Module): pass\nclass ModelNew(Model): pass",
              SUPER_FORWARD: "class M(nn.Module):\n    def forward(self, x):\n        return super().forward(x)"}


def example(field: str, item: str) -> str:
    """A line of Python that breaks a rule through `item` of its `field` (imports, names, ...)."""
    if field == "native":
        call = "1);" if item.endswith("(") else ""
        return f"s = 'void run(int n) {{ {item}{call} }} // native source'"
    return {"imports": f"import {item}", "names": f"x = {item}", "attributes": f"x = nn.{item}", "calls": f"x = {item}",
            "constructs": CONSTRUCTS.get(item, "")}[field]


FIELDS = ("imports", "names", "attributes", "calls", "constructs", "native")
EXAMPLES = [(r, field, item) for r in STATIC_RULES for field in FIELDS for item in getattr(r, field)]


@pytest.mark.parametrize(("rule", "field", "item"), EXAMPLES, ids=[f"{r.key}:{item}" for r, _, item in EXAMPLES])
def test_the_checker_applies_every_item_of_the_table_with_its_rules_reason(rule: StaticRule, field: str, item: str) -> None:
    src = "import torch\nimport torch.nn as nn\n" + example(field, item) + "\nclass ModelNew(nn.Module):\n    pass\n"
    r = check_source(src)
    if rule.flag:
        assert r.ok and [code for code, _ in r.flags] == [rule.flag], r.flags
        assert rule.reason in r.flags[0][1]
    else:
        assert {v.rule for v in r.violations} == {rule.key}, r.message()
        assert all(rule.reason in v.message and v.line >= 3 for v in r.violations), r.message()


OS_ALLOWED_USES = """
import os
import os.path as osp
from os import environ, getenv, path
from os.path import dirname, join
here = os.path.dirname(os.path.abspath(__file__))
where = join(dirname(here), osp.basename(here), path.join("a", "b"))
debug = os.environ.get("KC_DEBUG", "") or getenv("KC_DEBUG") or os.getenv("X")
seen = "CUDA_HOME" in os.environ and bool(list(os.environ.items())) and os.environ["PATH"] != ""
keys = [k for k in os.environ if k.startswith("TORCH")]
prev = os.environ.get("TORCH_CUDA_ARCH_LIST")
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
try:
    pass
finally:
    if prev is None:
        os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
    else:
        environ["TORCH_CUDA_ARCH_LIST"] = prev
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
del os.environ["TORCH_CUDA_ARCH_LIST"]
"""


def test_os_is_allowed_for_a_builds_paths_and_its_architectures() -> None:
    r = check_source(OS_ALLOWED_USES + "class ModelNew:\n    pass\n")
    assert r.ok, r.message()


@pytest.mark.parametrize("snippet", [
    "os.system('true')", "os.fork()", "os.kill(os.getpid(), 9)", "os._exit(0)", "fd = os.open('/etc/passwd', 0)",
    "os.listdir('.')", "os.getcwd()", "os.putenv('A', '1')", "os.environ['LD_PRELOAD'] = 'x.so'",
    "os.environ.update(TRITON_INTERPRET='0')", "del os.environ['OMP_NUM_THREADS']", "os.environ.pop('PATH')",
    "os.environ.setdefault('CUDA_VISIBLE_DEVICES', '1')", "os.environ.clear()", "env = os.environ",
    "getattr(os, 'sys' + 'tem')('true')", "os.path.os.system('true')", "p = os.path", "import os.path\nos.path.sys.exit()",
    "import os as o\no.fork()", "from os import system", "from os import path\npath.os.kill(1, 9)",
    "from os.path import os as o2", "import os.environ",
])
def test_the_rest_of_os_is_rejected(snippet: str) -> None:
    r = check_source("import os\n" + snippet + "\nclass ModelNew:\n    pass\n")
    assert not r.ok and {v.rule for v in r.violations} == {"os"}, r.message()
    assert RULES["os"].reason in r.message()


@pytest.mark.parametrize("snippet", [
    "try:\n    ext = 1\nexcept Exception:\n    ext = None",
    "def forward(x):\n    try:\n        return x.fast()\n    except RuntimeError:\n        return x.slow()",
    "try:\n    pass\nexcept:\n    raise",
    "try:\n    pass\nfinally:\n    pass",
])
def test_try_is_allowed(snippet: str) -> None:
    """A fallback to PyTorch inside try is the coverage rule's to stop (tests/redteam: 09_try_fallback)."""
    r = check_source("import torch\n" + snippet + "\nclass ModelNew:\n    pass\n")
    assert r.ok, r.message()


def test_a_finding_on_several_lines_is_said_once_with_its_lines() -> None:
    r = check_source("import torch\nexec('1')\nexec('2')\nclass ModelNew:\n    pass\n")
    assert r.message().startswith("lines 2, 3: exec: ") and r.message().count("exec") == 1


@pytest.mark.skipif(not (CORPUS / "lost-turns").is_dir(), reason="the real-model corpus is not beside the checkout")
@pytest.mark.parametrize("name", LOST_TO_STATIC)
def test_the_lost_turns_pass_the_static_stage(name: str) -> None:
    """Seven honest replies of a frontier model that judge 16 turned down for `import os` and `try` (issue 45)."""
    r = check_source((CORPUS / "lost-turns" / name).read_text())
    assert r.ok, r.message()


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
    ("std::jthread t([]{});", RULES["concurrency"].reason),
    ("pthread_create(&t, nullptr, f, nullptr);", RULES["concurrency"].reason),
    ("auto f = std::async(std::launch::async, g);", RULES["concurrency"].reason),
    ("std::for_each(std::execution::par, x, x + n, g);", RULES["concurrency"].reason),
    ('std::system("ls");', "system( in native source"),
])
def test_threads_of_ones_own_are_still_rejected_beside_openmp(code: str, words: str) -> None:
    r = check_source(PARALLEL.replace("at::parallel_for", code + "\n    at::parallel_for"))
    assert not r.ok and words in r.message()


def test_fallbacks_to_the_reference_are_rejected() -> None:
    inherit = "import torch.nn as nn\nclass Model(nn.Module): pass\nclass ModelNew(Model): pass\n"
    sup = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return super().forward(x)\n"
    assert "inheriting" in check_source(inherit).message()
    assert "super().forward" in check_source(sup).message()


def test_syntax_error_and_missing_model_new() -> None:
    r = check_source("import torch\ndef f(:\n")
    assert not r.ok and "line 2" in r.message() and "syntax error" in r.message()
    assert "no class ModelNew" in check_source("import torch\n").message()


def test_streams_are_flagged_not_rejected() -> None:
    r = check_source("import torch\nimport torch.nn as nn\ns = torch.cuda.Stream()\nclass ModelNew(nn.Module): pass\n")
    assert r.ok
    assert [code for code, _ in r.flags] == ["side_stream"] and RULES["streams"].reason in r.flags[0][1]


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
