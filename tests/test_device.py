"""What the parent decides about devices without a GPU: how a child names this process's GPU, and how a
pool of several GPUs divides the host's CPUs between them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcraft.judge.device import cpu_slices, visible_id


def test_a_child_names_the_gpu_as_this_process_sees_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_id(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # a Ray actor given GPU 1: its device 0 is GPU 1
    assert visible_id(0) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa, GPU-bbbb")
    assert visible_id(1) == "GPU-bbbb"


def fake_sysfs(root: Path, cores: dict[int, tuple[int, int]]) -> Path:
    """A /sys/devices/system/cpu with each CPU's (package, core)."""
    for cpu, (package, core) in cores.items():
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")
    return root


def test_each_device_gets_whole_cores_of_its_own(tmp_path: Path) -> None:
    # 8 cores with two hyperthreads each, numbered as Linux does: CPU n and n + 8 share core n.
    sysfs = fake_sysfs(tmp_path, {cpu: (0, cpu % 8) for cpu in range(16)})
    slices = cpu_slices(2, set(range(16)), sysfs)
    assert slices == [frozenset({0, 1, 2, 3, 8, 9, 10, 11}), frozenset({4, 5, 6, 7, 12, 13, 14, 15})]
    three = cpu_slices(3, set(range(16)), sysfs)
    assert three is not None and sorted(len(s) for s in three) == [4, 6, 6]
    assert not set.intersection(*map(set, three)) and set().union(*three) == set(range(16))


def test_too_few_cores_are_not_divided(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path, {0: (0, 0), 1: (0, 0), 2: (0, 1), 3: (0, 1)})  # 2 cores, 4 threads
    assert cpu_slices(2, {0, 1, 2, 3}, sysfs) is None
    assert cpu_slices(1, {0, 1, 2, 3}, sysfs) is None
    assert cpu_slices(2, {0, 1, 2, 3}, tmp_path / "missing") == [frozenset({0, 1}), frozenset({2, 3})]  # no topology: a CPU a core
