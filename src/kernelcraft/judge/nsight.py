"""Nsight Compute's command line (ncu): the command that profiles a driver process, what it needs of the
sandbox, and its CSV turned into kernel records. Parent side; nothing here runs a kernel."""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .kernel_profile import KernelRecord

DURATION = "gpu__time_duration.sum"
# The metric each KernelRecord field comes from.
METRICS = {
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
}
SHARED = ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
# Warp stall reasons, cycles per issued instruction; by pattern, since the set differs between architectures
# and a metric ncu does not know fails the whole run.
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
STALLS = r"regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$"
# "selected" is a warp issuing and "not_selected" one that could have: neither is a stall that slows the kernel.
_NOT_STALLS = {"selected", "not_selected"}
# ncu's units, to microseconds for times and bytes for sizes (ncu scales them to fit each value).
_SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6,
          "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "KiB": 1024.0, "MiB": 1024.0**2}
# ncu talks to the process it profiles over TCP, on one of these ports (its defaults, given explicitly: the ncu pass's
# sandbox lets it bind and connect to these alone, on a loopback of its own).
NCU_PORT, NCU_PORTS = 49152, 64
CAP_SYS_ADMIN, CAP_PERFMON = 21, 38
# NVIDIA: "Starting in driver version R565, the CAP_PERFMON capability will also allow access" to the counters.
_PERFMON_DRIVER = 565
_PARAMS = Path("/proc/driver/nvidia/params")
_DRIVER_VERSION = Path("/sys/module/nvidia/version")
# Refusals that hold for the whole machine, every later ncu run failing the same way: no access to the GPU's
# counters, or a profiler that cannot start at all (seen in a gVisor sandbox: "LibraryNotLoaded").
REFUSALS = ("ERR_NVGPUCTRPERM", "Failed to initialize the profiler")


@dataclass(frozen=True)
class Launch:
    """One profiled kernel launch: its name and metrics (times in us, sizes in bytes)."""

    name: str
    metrics: dict[str, float]


def find_ncu() -> str | None:
    """ncu on the PATH, else in CUDA's toolkit or where Nsight Compute's installer puts it (the newest
    version), which is off the PATH on many machines that have it."""
    found = shutil.which("ncu")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidates = [os.path.join(home, "bin", "ncu"), *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def counters_capability(params: Path = _PARAMS, version: Path = _DRIVER_VERSION) -> int | None:
    """The capability a process needs to read the GPU's performance counters (ncu's metrics): None where the
    driver lets every user read them (`RmProfilingAdminOnly: 0`, set by the module option
    NVreg_RestrictProfilingToAdminUsers=0); else CAP_PERFMON from driver R565 on, CAP_SYS_ADMIN before it (or
    where the driver's version cannot be read). https://developer.nvidia.com/ERR_NVGPUCTRPERM"""
    try:
        if re.search(r"^RmProfilingAdminOnly:\s*0\s*$", params.read_text(), re.M):
            return None
    except OSError:
        pass  # no driver here, or no such file: the driver's default restricts them
    try:
        major = int(version.read_text().strip().split(".")[0])
    except (OSError, ValueError):
        return CAP_SYS_ADMIN
    return CAP_PERFMON if major >= _PERFMON_DRIVER else CAP_SYS_ADMIN


def ncu_command(ncu: str, log: Path, max_launches: int, target: list[str]) -> list[str]:
    """ncu profiling `target` from its cudaProfilerStart to its cudaProfilerStop (the driver's timed
    region, not its warm-up), at most `max_launches` launches, the CSV written to `log`. The clocks are
    left as they are (ncu otherwise locks them to base, for every process on the device)."""
    metrics = [DURATION, *METRICS.values(), *SHARED, STALLS]
    return [ncu, "--port", str(NCU_PORT), "--max-connections", str(NCU_PORTS), "--clock-control", "none",
            "--profile-from-start", "off", "--target-processes", "all", "--launch-count", str(max_launches),
            "--csv", "--log-file", str(log), "--metrics", ",".join(metrics), *target]


def errors(output: str) -> list[str]:
    """ncu's error lines ("==ERROR== ...")."""
    return [line.split("==ERROR==", 1)[1].strip() for line in output.splitlines() if "==ERROR==" in line]


def refusal(output: str) -> str | None:
    """The first error that refuses profiling on this machine (no access to the counters), or None."""
    return next((e for e in errors(output) if any(r in e for r in REFUSALS)), None)


def _number(value: str, unit: str) -> float | None:
    """A metric value as ncu prints it ("1,205.00", "n/a") in base units, or None."""
    try:
        return float(value.replace(",", "")) * _SCALE.get(unit, 1.0)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[Launch]:
    """The launches of ncu's CSV (the details page: one row per launch and metric), in launch order.
    Lines before the header (ncu's ==PROF== progress) are skipped; metrics without a value ("n/a") are
    left out."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    launches: dict[str, Launch] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("Metric Name") or row.get("ID") is None:
            continue  # a stray line of the application's own
        launch = launches.setdefault(row["ID"], Launch(row["Kernel Name"], {}))
        value = _number(row.get("Metric Value") or "", row.get("Metric Unit") or "")
        if value is not None:
            launch.metrics[row["Metric Name"]] = value
    return list(launches.values())


def _weighted(launches: list[Launch], metric: str) -> float | None:
    """The launches' `metric`, weighted by their durations (None when none has it)."""
    have = [(x.metrics[metric], x.metrics.get(DURATION, 0.0)) for x in launches if metric in x.metrics]
    total = sum(w for _, w in have)
    if not have:
        return None
    return sum(v * w for v, w in have) / total if total > 0 else sum(v for v, _ in have) / len(have)


def _stalls(launches: list[Launch], top: int) -> list[tuple[str, float]]:
    reasons = {m.group(1): name for x in launches for name in x.metrics if (m := _STALL.match(name))}
    found = [(reason, _weighted(launches, name) or 0.0) for reason, name in reasons.items() if reason not in _NOT_STALLS]
    return sorted(found, key=lambda rv: -rv[1])[:top]


def kernel_records(launches: list[Launch], own: Callable[[str], bool], stalls: int = 3) -> list[KernelRecord]:
    """The launches grouped by kernel name, largest total duration first: durations added up, rates
    weighted by duration, the largest resources, and the `stalls` top stall reasons."""
    by_name: dict[str, list[Launch]] = {}
    for x in launches:
        by_name.setdefault(x.name, []).append(x)
    records = []
    for name, group in by_name.items():
        registers = [x.metrics[METRICS["registers"]] for x in group if METRICS["registers"] in x.metrics]
        shared = [sum(x.metrics.get(m, 0.0) for m in SHARED) for x in group if any(m in x.metrics for m in SHARED)]
        records.append(KernelRecord(
            name=name, calls=len(group), time_us=sum(x.metrics.get(DURATION, 0.0) for x in group), own=own(name),
            dram_pct=_weighted(group, METRICS["dram_pct"]), sm_pct=_weighted(group, METRICS["sm_pct"]),
            occupancy_pct=_weighted(group, METRICS["occupancy_pct"]), registers=int(max(registers)) if registers else None,
            shared_bytes=int(max(shared)) if shared else None, stalls=_stalls(group, stalls)))
    return sorted(records, key=lambda k: -k.time_us)
