"""The caches the judge shares between evaluations (published builds, device ceilings): only what the
judge wrote, as it recorded it, is ever used. Fast checks of the rules; the attacks themselves run
against the real judge in tests/redteam/test_shared_caches.py."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from kernelcraft.judge import builds, ceilings
from kernelcraft.judge.builds import BuildBudget, BuildService, BuildTimeout
from kernelcraft.judge.integrity import make_dir
from kernelcraft.judge.locks import file_lock
from kernelcraft.judge.protocol import ARCH_VARIABLE, BuildRequest, Built, encode
from kernelcraft.judge.publish import publish_build, publish_failure
from kernelcraft.judge.worker.buildcache import BuildError, BuildRecorder, cache_key, request_arguments
from kernelcraft.judge.worker.buildstore import MARKER, builds_dir, key_dir, library_name, lookup

UID = os.geteuid()
KEY = "0123456789abcdef01234567"


@pytest.fixture
def published(tmp_path: Path) -> Path:
    publish_build(builds_dir(tmp_path), KEY, b"\x7fELF the judge's build", 1.5)
    return key_dir(builds_dir(tmp_path), KEY)


def test_a_published_build_is_found_as_the_judge_wrote_it(tmp_path: Path, published: Path) -> None:
    found = lookup(builds_dir(tmp_path), KEY, UID)
    assert found is not None and not found.failed and found.path == published / library_name(KEY) and found.build_s == 1.5
    assert oct(published.stat().st_mode & 0o777) == "0o755" and oct(found.path.stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("tamper", ["swapped library", "planted failed.log", "record of another key", "writable by others",
                                    "another user's", "library a link", "record a FIFO"])
def test_a_build_changed_after_the_judge_published_it_is_ignored(tmp_path: Path, published: Path, tamper: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    library, uid = published / library_name(KEY), UID
    if tamper == "swapped library":
        library.write_bytes(b"\x7fELF planted")
    elif tamper == "planted failed.log":  # the record says built: a failure beside it changes nothing
        (published / "failed.log").write_text("main.cpp:1:1: error: planted")
        assert lookup(builds_dir(tmp_path), KEY, UID) is not None
        return
    elif tamper == "record of another key":
        other = "f" * 24
        published.rename(key_dir(builds_dir(tmp_path), other))
        (key_dir(builds_dir(tmp_path), other) / library_name(KEY)).rename(key_dir(builds_dir(tmp_path), other) / library_name(other))
        assert lookup(builds_dir(tmp_path), other, UID) is None
        return
    elif tamper == "writable by others":
        library.chmod(0o666)
    elif tamper == "another user's":
        uid = UID + 1
    elif tamper == "record a FIFO":  # opened as a file, it would block the reader for ever
        (published / MARKER).unlink()
        os.mkfifo(published / MARKER)
    else:
        target = published / "elsewhere.so"
        library.rename(target)
        library.symlink_to(target)
    assert lookup(builds_dir(tmp_path), KEY, uid) is None
    assert "warning: ignoring the build directory" in capsys.readouterr().err


def test_a_directory_planted_before_the_build_is_replaced_when_the_judge_publishes(tmp_path: Path) -> None:
    planted = key_dir(builds_dir(tmp_path), KEY)
    planted.mkdir(parents=True)
    (planted / "failed.log").write_text("main.cpp:1:1: error: planted")
    (planted / MARKER).write_text(json.dumps({"key": KEY, "status": "failed", "file": "failed.log", "sha256": "0" * 64}))
    assert lookup(builds_dir(tmp_path), KEY, UID) is None
    publish_build(builds_dir(tmp_path), KEY, b"\x7fELF the judge's build", 1.0)
    found = lookup(builds_dir(tmp_path), KEY, UID)
    assert found is not None and not found.failed and not (planted / "failed.log").exists()
    assert [p.name for p in builds_dir(tmp_path).iterdir()] == [planted.name]  # nothing left aside


def test_a_published_failure_fails_again_at_once(tmp_path: Path) -> None:
    publish_failure(builds_dir(tmp_path), KEY, "main.cpp:2:3: error: expected ';'", 2.0)
    found = lookup(builds_dir(tmp_path), KEY, UID)
    assert found is not None and found.failed
    assert found.failure().startswith("main.cpp:2:3: error: expected ';'\n(this build failed the same way before")


@pytest.fixture(autouse=True)
def _no_header_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builders here are stand-ins: no precompiled header is made beside them (test_precompiled.py)."""
    monkeypatch.setenv("KERNELCRAFT_PCH_DIR", "off")


def _service(tmp_path: Path) -> BuildService:
    return BuildService(tmp_path, "cpu", 0, 1, "")


def _fake_builder(tries: list[float], seconds: float = 0.0):
    """A builder that leaves a shared object after `seconds`, as the real one does."""
    def run(module, args, scratch, env, cache_dir, timeout, group, cpus, read=()):
        tries.append(time.monotonic())
        time.sleep(seconds)
        spec = json.loads((scratch / "spec.json").read_text())
        (Path(spec["build_directory"]) / f"{spec['name']}.so").write_bytes(b"\x7fELF built")
        return 0, seconds
    return run


def test_one_key_is_built_once_however_many_ask_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[float] = []
    monkeypatch.setattr(builds, "run_untrusted", _fake_builder(tries, 0.5))
    request = {"request": "build", "arguments": {"cpp_sources": ["int f();"]}}
    replies: list[Built] = []
    threads = [threading.Thread(target=lambda: replies.append(_service(tmp_path).answer(request, BuildBudget(60.0))))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert replies == [Built(True)] * 3 and len(tries) == 1


def test_a_lock_held_for_ever_stalls_no_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that holds a key's lock (stuck, or on purpose) costs a candidate half its build time at most."""
    tries: list[float] = []
    monkeypatch.setattr(builds, "run_untrusted", _fake_builder(tries))
    request = {"request": "build", "arguments": {"cpp_sources": ["int f();"]}}
    key = cache_key(request["arguments"], "", "")
    with file_lock(tmp_path / "locks" / f"build-{key}.lock", 1.0) as held:
        assert held
        t0 = time.monotonic()
        assert _service(tmp_path).answer(request, BuildBudget(1.0)) == Built(True)
    assert len(tries) == 1 and 0.5 <= time.monotonic() - t0 < 1.0


def test_a_request_the_judge_cannot_read_builds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[float] = []
    monkeypatch.setattr(builds, "run_untrusted", _fake_builder(tries))
    for request in ({"request": "build", "arguments": {"cpp_sources": ["x"], "build_directory": "/etc"}},
                    {"request": "build", "arguments": ["x"]}, {"request": "other", "arguments": {}}):
        reply = _service(tmp_path).answer(request, BuildBudget(60.0))
        assert not reply.ok and "could not read the build request" in reply.message
    assert not tries


def test_a_candidates_builds_together_get_the_build_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builds, "run_untrusted", _fake_builder([], 0.3))
    budget = BuildBudget(0.5)
    _service(tmp_path).answer({"request": "build", "arguments": {"cpp_sources": ["a"]}}, budget)
    with pytest.raises(BuildTimeout, match="ran past the build timeout"):
        _service(tmp_path).answer({"request": "build", "arguments": {"cpp_sources": ["b"]}}, budget)


def test_a_link_the_builder_leaves_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the judge's own file")

    def builder(module, args, scratch, env, cache_dir, timeout, group, cpus, read=()):
        spec = json.loads((scratch / "spec.json").read_text())
        (Path(spec["build_directory"]) / f"{spec['name']}.so").symlink_to(secret)
        return 0, 0.1

    monkeypatch.setattr(builds, "run_untrusted", builder)
    reply = _service(tmp_path).answer({"request": "build", "arguments": {"cpp_sources": ["x"]}}, BuildBudget(60.0))
    assert not reply.ok and not reply.machine_fault and "left no extension" in reply.message
    assert not list(builds_dir(tmp_path).glob("kc_*"))


def test_without_the_judge_to_ask_nothing_is_built(tmp_path: Path) -> None:
    """A profile's driver, a worker after its candidate loaded: they only read the cache."""
    idle = BuildRecorder(tmp_path, UID, "", lambda module, functions: None, ask=None)
    with pytest.raises(BuildError, match="built only while the candidate loads"):
        idle.load_inline(name="x", cpp_sources=["int f();"])
    assert not builds_dir(tmp_path).exists()


def test_ceilings_are_believed_only_as_the_judge_recorded_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path.chmod(0o1777)  # a cache in /tmp: only the cache directory itself must be the judge's
    tmp_path = make_dir(tmp_path / "cache")
    measured = {"bandwidth_bytes_per_s": 1e10, "peak_flops": {"float32": 1e11}, "max_flops": 1e11}
    assert ceilings.record_ceilings(tmp_path, "cpu|x", measured) == measured
    assert ceilings.cached_ceilings(tmp_path) == {"cpu|x": measured}
    inflated = {"cpu|x": {**measured, "bandwidth_bytes_per_s": 1e30}}
    (tmp_path / ceilings.FILE).write_text(json.dumps(inflated))
    assert ceilings.cached_ceilings(tmp_path) == {}
    assert "warning: ignoring the cached ceilings" in capsys.readouterr().err
    # measured again: the planted numbers take no part in the best of old and new
    assert ceilings.record_ceilings(tmp_path, "cpu|x", measured)["bandwidth_bytes_per_s"] == 1e10


def _recording_builder(seen: list[dict]):
    """A builder that records the environment and the spec it was started with, then leaves a shared object."""
    def run(module, args, scratch, env, cache_dir, timeout, group, cpus, read=()):
        spec = json.loads((scratch / "spec.json").read_text())
        seen.append({"env": dict(env), "arguments": spec["arguments"]})
        (Path(spec["build_directory"]) / f"{spec['name']}.so").write_bytes(b"\x7fELF built")
        return 0, 0.1
    return run


GENCODE = {"cpp_sources": ["int f();"], "cuda_sources": ["__global__ void k() {}"],
           "extra_cuda_cflags": ["-O3", "-gencode=arch=compute_90a,code=sm_90a"]}


def test_a_build_is_made_for_the_architectures_the_candidates_environment_asks_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidate sets TORCH_CUDA_ARCH_LIST around its load_inline (the wgmma kernels need 9.0a): its build
    request carries it, the builder's environment gets it, and it keys the build; a -gencode flag reaches the
    builder as it was written."""
    seen: list[dict] = []
    monkeypatch.setattr(builds, "run_untrusted", _recording_builder(seen))
    service = _service(tmp_path)
    asked: list[str] = []

    def ask(arguments: dict, arch: str) -> Built:
        asked.append(arch)
        return service.answer(encode(BuildRequest(arguments, arch)), BuildBudget(60.0))

    recorder = BuildRecorder(tmp_path, UID, "", lambda module, functions: None, ask)
    monkeypatch.setenv(ARCH_VARIABLE, "9.0a")  # as the candidate's process sets it: the judge's own is another
    with pytest.raises(BuildError) as failed:  # found where the worker looks for it; only the stand-in's library does not load
        recorder.load_inline(name="x", **GENCODE)
    assert not failed.value.machine_fault and "does not verify" not in str(failed.value)
    arguments = request_arguments(GENCODE)
    assert asked == ["9.0a"] and seen[0]["env"][ARCH_VARIABLE] == "9.0a"
    assert seen[0]["arguments"]["extra_cuda_cflags"] == ["-O3", "-gencode=arch=compute_90a,code=sm_90a"]
    assert lookup(builds_dir(tmp_path), cache_key(arguments, "", "9.0a"), UID) is not None
    assert lookup(builds_dir(tmp_path), cache_key(arguments, "", ""), UID) is None
    assert len({cache_key(arguments, "", a) for a in ("", "9.0", "9.0a", "8.0;8.6+PTX")}) == 4
    # unset in the candidate's process: the builder goes without, whatever the judge's own environment says
    assert service.answer(encode(BuildRequest(arguments, "")), BuildBudget(60.0)) == Built(True)
    assert ARCH_VARIABLE not in seen[1]["env"]


@pytest.mark.parametrize("arch", ["Hopper", "9.0a;", "9.0 ; 8.6", "native", "9.0a; rm -rf /", "9.0\n", 90, None, ["9.0"],
                                  ";".join(["9.0"] * 17)])
def test_architectures_that_are_no_list_of_them_build_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              arch: object) -> None:
    seen: list[dict] = []
    monkeypatch.setattr(builds, "run_untrusted", _recording_builder(seen))
    reply = _service(tmp_path).answer({"request": "build", "arguments": {"cpp_sources": ["x"]}, "arch_list": arch},
                                      BuildBudget(60.0))
    assert not reply.ok and not reply.machine_fault and ARCH_VARIABLE in reply.message and "9.0a" in reply.message
    assert not seen


@pytest.mark.parametrize("arch", ["", "9.0", "9.0a", "10.0f", "8.0;8.6+PTX", "7.5 8.0 8.6 9.0+PTX"])
def test_lists_of_architectures_are_built_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arch: str) -> None:
    seen: list[dict] = []
    monkeypatch.setattr(builds, "run_untrusted", _recording_builder(seen))
    request = {"request": "build", "arguments": {"cpp_sources": ["x"]}, "arch_list": arch}
    assert _service(tmp_path).answer(request, BuildBudget(60.0)) == Built(True)
    assert seen[0]["env"].get(ARCH_VARIABLE, "") == arch
