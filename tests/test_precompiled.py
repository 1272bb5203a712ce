"""The judge's precompiled torch/extension.h (judge/precompiled.py): made in the background by the first build with
new flags, through the sandbox, only for flags that name no file; and fitting the compile torch runs for those
flags, which GCC proves by refusing (with -Werror=invalid-pch) any header that does not."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from torch.utils import cpp_extension

import kernelcraft.judge.precompiled as precompiled
from kernelcraft.judge.integrity import make_dir
from kernelcraft.judge import Judge
from kernelcraft.judge.verdict import Status
from kernelcraft.tasks import load_task_file

from .redteam.cases import CANDIDATES_DIR, CASES_BY_ID, TASKS_DIR

pytestmark = pytest.mark.skipif(not precompiled.gcc_version(), reason="no GCC: no precompiled headers")


@pytest.mark.parametrize("flags, ok", [
    (None, True), (["-O3"], True), (["-O3", "-march=native", "-fno-trapping-math"], True), (["-O2", "-fopenmp", "-DN=4"], True),
    (["-fplugin=/tmp/x.so"], False), (["-include", "/tmp/evil.h"], False), (["@/tmp/flags"], False), (["-I/tmp"], False),
    (["-specs=/tmp/s"], False), ("-O3", False),
])
def test_only_flags_that_name_no_file_share_a_header(flags: object, ok: bool) -> None:
    assert precompiled.eligible({"cpp_sources": ["int x;"], "extra_cflags": flags}) is ok


def test_include_paths_or_no_cpp_share_no_header() -> None:
    assert not precompiled.eligible({"cpp_sources": ["int x;"], "extra_include_paths": ["/tmp"]})
    assert not precompiled.eligible({"cpp_sources": [], "extra_cflags": ["-O3"]})
    assert precompiled.signature({"extra_cflags": ["-O3"]}) != precompiled.signature({"extra_cflags": ["-O2"]})
    assert precompiled.signature({"extra_cflags": ["-O3"]}) != precompiled.signature({"extra_cflags": ["-O3"], "cuda_sources": ["x"]})


@pytest.mark.slow
def test_a_build_makes_the_header_that_fits_torchs_own_compile(cpu_judge: Judge, cache_dir: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert precompiled.root(cache_dir) is None  # the suite's setting (conftest); a user's default is the cache's pch/
    monkeypatch.setenv(precompiled.ENV, str(tmp_path / "pch"))
    where = precompiled.root(cache_dir)
    assert where == tmp_path / "pch"
    sig = precompiled.signature({"cpp_sources": ["x"], "extra_cflags": ["-O3"]})  # the flags of the suite's C++ candidates
    case = CASES_BY_ID["honest_relu_cpp_cpu"]
    # a source no run has built (a kept test cache holds the candidate's own): its build is the judge's to make
    source = (CANDIDATES_DIR / case.candidate).read_text().replace("#include <algorithm>", f"#include <algorithm>\n// {uuid.uuid4()}")
    v = cpu_judge.evaluate(load_task_file(TASKS_DIR / case.task), source)
    assert v.status == Status.CORRECT, v.message
    deadline = time.monotonic() + 600
    while (header := precompiled.ready(where, sig)) is None:  # made after this build, or another test's before it
        assert time.monotonic() < deadline, "no precompiled header 10 minutes after a build with its flags"
        time.sleep(1)
    assert oct(os.stat(header.with_name("extension.h.gch")).st_mode & 0o777) == "0o644"
    # torch's own compile with these flags takes it: with -Werror=invalid-pch, a header that did not fit is an error
    ext = cpp_extension.load_inline("kc_test_pch_fits", cpp_sources=["int answer() { return 42; }"], functions=["answer"],
                                    extra_cflags=["-include", str(header), "-Winvalid-pch", "-Werror=invalid-pch", "-O3"],
                                    build_directory=str(make_dir(tmp_path / "build")))
    assert ext.answer() == 42
