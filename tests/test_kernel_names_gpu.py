"""Every C++ form of a kernel (tests/kernel_forms.py) built by load_inline and launched under the profiler: each
name the GPU's profiler gives is the candidate's own, by the names the static check collects and through the
function symbols of the extension (issue 45). With KERNELCRAFT_ARTIFACTS set (scripts/gpu-check sets it), the
names observed go to kernel_name_triples.json there, for the CPU table. (`-m gpu`; skipped without a GPU.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from torch.autograd import DeviceType

from kernelcraft.judge.static import check_source
from kernelcraft.judge.worker.coverage import device_share, is_custom_kernel
from kernelcraft.judge.worker.cxx_names import canonical_mangled
from kernelcraft.judge.worker.kernel_names import CompiledKernels, function_symbols

from .kernel_forms import FORMS, cuda_source

_CPP = "void launch_forms(torch::Tensor x);"
_CUDA = cuda_source() + "\nvoid launch_forms(torch::Tensor x) { launch_all(x.data_ptr<float>()); }\n"


@pytest.mark.gpu
def test_every_form_of_a_kernel_the_profiler_names_is_the_candidates_own(tmp_path: Path) -> None:
    from torch.utils.cpp_extension import load_inline

    ext = load_inline(name="kc_test_kernel_forms", cpp_sources=[_CPP], cuda_sources=[_CUDA], functions=["launch_forms"],
                      build_directory=str(tmp_path), extra_cuda_cflags=["-O2"])
    x = torch.zeros(1, device="cuda")
    ext.launch_forms(x)  # loads the module's kernels before the profiled call
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
        ext.launch_forms(x)
        torch.cuda.synchronize()
    events = prof.events()
    ran = sorted((e for e in events if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    assert len(ran) == len(FORMS), [e.name[:120] for e in ran]  # one stream: in the order launch_all launches them
    names = check_source(f"SOURCE = {_CUDA!r}\n\nclass ModelNew:\n    pass\n", enforce=False).kernel_names
    compiled = CompiledKernels()
    compiled.add_binary(ext.__file__)
    symbols = function_symbols(Path(ext.__file__).read_bytes())
    triples = []
    for form, event in zip(FORMS, ran):
        profiled = event.name
        stubs = sorted(s for s in symbols if s == profiled or canonical_mangled(s) == canonical_mangled(profiled)
                       or (s.startswith("_Z") and torch._C._demangle(s) == torch._C._demangle(profiled)))
        triples.append({"form": form.form, "declaration": form.declaration, "mangled": stubs, "profiled": profiled,
                        "table": form.profiled})
        print(f"[gpu] {form.form}: {profiled[:160]} (table: {form.profiled[:80]}; stubs {[s[:80] for s in stubs]})")
    keep = os.environ.get("KERNELCRAFT_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / "kernel_name_triples.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
             "triples": triples}, indent=1))
    for form, event in zip(FORMS, ran):
        assert is_custom_kernel(event.name, names, CompiledKernels()) == form.by_name, (form.form, event.name[:160])
        assert compiled.holds(event.name), (form.form, event.name[:160])
    # and as the judge counts a call: every kernel the candidate's own code launched, all of the device time
    share = device_share(events, names, compiled)
    assert share.coverage == pytest.approx(1.0) and all(k.own for k in share.kernels), share.kernels
