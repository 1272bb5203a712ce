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
from kernelcraft.judge.isolation import closed_to_workers
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


def test_by_default_the_headers_are_the_users_shared_by_every_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(precompiled.ENV)
    shared = tmp_path / "xdg" / "kernelcraft" / "pch"
    assert precompiled.shared_dir() == shared
    # where workers of another user could not reach it (a judge run as root, its home closed), each cache keeps its own
    expected = shared if closed_to_workers(shared) is None else tmp_path / "ws" / "cache" / "pch"
    assert precompiled.root(tmp_path / "ws" / "cache") == expected
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not a path the XDG rules take: ~/.cache
    assert precompiled.shared_dir() == Path.home() / ".cache" / "kernelcraft" / "pch"
    monkeypatch.setenv(precompiled.ENV, "off")
    assert precompiled.root(tmp_path / "ws" / "cache") is None


def test_a_header_is_wanted_from_a_processs_second_build_with_its_flags() -> None:
    sig = precompiled.signature({"cpp_sources": ["x"], "extra_cflags": ["-O3", f"-DKC_{uuid.uuid4().hex}"]})
    assert precompiled.wanted(sig) is False  # a lone eval builds once: no header
    assert precompiled.wanted(sig) is True
    assert precompiled.wanted(sig) is True


@pytest.mark.slow
def test_a_second_build_makes_the_header_that_fits_torchs_own_compile(cpu_judge: Judge, cache_dir: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert precompiled.root(cache_dir) is None  # the suite's setting (conftest); a user's default is their cache's pch/
    monkeypatch.setenv(precompiled.ENV, str(tmp_path / "pch"))
    where = precompiled.root(cache_dir)
    assert where == tmp_path / "pch"
    # flags of this test's own (a macro no source reads): the first build with them is this test's, in any process
    flags = ["-O3", f"-DKC_PCH_TEST_{uuid.uuid4().hex}"]
    sig = precompiled.signature({"cpp_sources": ["x"], "extra_cflags": flags})
    case = CASES_BY_ID["honest_relu_cpp_cpu"]
    task = load_task_file(TASKS_DIR / case.task)
    honest = (CANDIDATES_DIR / case.candidate).read_text().replace('extra_cflags=["-O3"]', f"extra_cflags={flags!r}")

    def variant() -> str:  # a source no run has built: its build is the judge's to make
        return honest.replace("#include <algorithm>", f"#include <algorithm>\n// {uuid.uuid4()}")

    v = cpu_judge.evaluate(task, variant())
    assert v.status == Status.CORRECT, v.message
    assert not (where / f".{sig}.lock").exists()  # one build: no header is started
    v = cpu_judge.evaluate(task, variant())
    assert v.status == Status.CORRECT, v.message
    deadline = time.monotonic() + 600
    while (header := precompiled.ready(where, sig)) is None:  # made after the second build
        assert time.monotonic() < deadline, "no precompiled header 10 minutes after a second build with its flags"
        time.sleep(1)
    assert oct(os.stat(header.with_name("extension.h.gch")).st_mode & 0o777) == "0o644"
    assert not list(where.glob(".staging-*"))
    # torch's own compile with these flags takes it: with -Werror=invalid-pch, a header that did not fit is an error
    ext = cpp_extension.load_inline("kc_test_pch_fits", cpp_sources=["int answer() { return 42; }"], functions=["answer"],
                                    extra_cflags=["-include", str(header), "-Winvalid-pch", "-Werror=invalid-pch", *flags],
                                    build_directory=str(make_dir(tmp_path / "build")))
    assert ext.answer() == 42
