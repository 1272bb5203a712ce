"""Parent side of the sandbox: what this machine can isolate a worker with, found once per process,
and the command and policy each worker starts under (worker/confine.py applies the policy).

- Another user: where the judge runs as root, workers run as `kernelcraft-worker` (created on first
  use, or named by KERNELCRAFT_WORKER_USER).
- Namespaces (util-linux `unshare`): no network, a PID namespace (everything the candidate starts,
  daemons in new sessions included, dies with the worker), its own /proc, IPC and /dev/shm. Not as
  root, inside a user namespace.
- Landlock: the worker writes only its scratch directory; it reads the Python environment, the
  toolchain and the system's directories, and of the judge's cache only published builds and the
  device locks: never the workspace, the store, other workers' scratch or the ceilings.
- Python starts isolated (`-I -S`): no `.pth` file is processed anywhere.
- The ncu pass of a profile (profiler.py) alone gets an `Allowance`: the one capability the GPU's counters
  need, where the judge is root and the driver restricts them (it then stays root, with that capability
  alone), and ncu's TCP ports, on a loopback of its own.

What cannot be had is said once, loudly, with the reason; `serve-judge` refuses to start then.
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import kernelcraft

from .locks import machine_lock_dir
from .worker import landlock
from .worker.confine import BOOT, ENV, Policy

WORKER_USER = "kernelcraft-worker"
USER_ENV = "KERNELCRAFT_WORKER_USER"
SWITCH_ENV = "KERNELCRAFT_SANDBOX"  # "off": workers run unconfined (a before/after measurement, debugging)
_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/sys", "/proc", "/dev")
_DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidia*", "/dev/nvidia-caps/*",
                 "/dev/nvidia-uvm*")
_NAMESPACES = ("--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc")


@dataclass(frozen=True)
class Allowance:
    """What one kind of confined process may have beyond a worker's (the ncu pass: profiler.py). `capabilities`:
    kept where the judge is root, the process staying root to keep them (none else); `tcp_ports`: the ports it
    may bind and connect to, on the loopback of a network namespace of its own where it has one; `proc_tree`: the
    processes it starts may write their own /proc entries (ncu's target, whose CUDA driver does as it starts), given
    only where it has a PID namespace, so its /proc holds none but its own processes (confine.Policy.proc_tree)."""

    capabilities: tuple[int, ...] = ()
    tcp_ports: tuple[int, ...] = ()
    proc_tree: bool = False


@dataclass(frozen=True)
class Isolation:
    """How workers are isolated on this machine; `problems` says what is missing, and why."""

    landlock_abi: int
    namespaces: tuple[str, ...]  # the `unshare` arguments every worker starts under; () where none
    uid: int | None  # the user workers become (the judge runs as root); None: the judge's own
    gid: int | None
    problems: tuple[str, ...]
    root_only: str | None = None  # why workers stay root without capabilities instead (a path another user cannot read)
    enabled: bool = True

    @property
    def complete(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        parts = [f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no Landlock",
                 "namespaces (net, mount, ipc; pid on the CPU)" if self.namespaces else "no namespaces",
                 f"user {self.uid}" if self.uid is not None else
                 f"root without capabilities ({self.root_only} is closed to other users)" if self.root_only else
                 f"the judge's user {os.geteuid()}"]
        return ", ".join(parts)


def _worker_user() -> tuple[int | None, int | None, str | None]:
    """The unprivileged user of workers where the judge is root: (uid, gid, problem)."""
    if os.geteuid() != 0:
        return None, None, None
    name = os.environ.get(USER_ENV, WORKER_USER)
    if name.isdigit():
        return int(name), int(name), None
    try:
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid, None
    except KeyError:
        pass
    if shutil.which("useradd") is None:
        return None, None, f"the judge runs as root and there is no user {name!r} (and no useradd to create it)"
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                    "--user-group", name], capture_output=True)
    try:  # a concurrent judge may have created it first: either way it exists now
        entry = pwd.getpwnam(name)
    except KeyError:
        return None, None, f"the judge runs as root and the user {name!r} could not be created"
    return entry.pw_uid, entry.pw_gid, None


def _namespaces() -> tuple[tuple[str, ...], str | None]:
    if shutil.which("unshare") is None:
        return (), "util-linux `unshare` is not installed: no network, PID or mount namespace for workers"
    flags = _NAMESPACES if os.geteuid() == 0 else ("--user", "--map-root-user", *_NAMESPACES)
    try:
        r = subprocess.run(["unshare", *flags, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return (), f"`unshare` could not run: {e}"
    if r.returncode != 0:
        reason = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return (), f"namespaces are not permitted here ({reason}): no network, PID or mount namespace for workers"
    return flags, None


def _unreadable_for_others(paths: list[str]) -> str | None:
    """The first of `paths` that a user other than the owner cannot reach (a directory on the way
    without o+x, or the path itself without o+r), or None."""
    for entry in paths:
        p = Path(entry).resolve()
        for d in [*reversed(p.parents), p]:
            try:
                mode = d.stat().st_mode
            except OSError:
                break
            needed = stat.S_IROTH if d == p else stat.S_IXOTH
            if not mode & needed:
                return str(d)
    return None


class CacheClosed(Exception):
    """The judge's cache lies under a directory its sandboxed workers cannot enter; one line for the user."""


def closed_to_workers(path: Path) -> str | None:
    """Where workers running as another user would be stopped on their way to `path` (the first directory on
    it closed to other users), or None: they run as the judge's user, or reach it."""
    return None if isolation().uid is None else _unreadable_for_others([str(path)])


def check_cache_reachable(cache_dir: Path) -> None:
    """Raise CacheClosed if workers run as another user and cannot reach `cache_dir` (their scratch directories
    and the published builds lie under it): every candidate would otherwise fail as a judge error."""
    iso = isolation()
    closed = closed_to_workers(cache_dir)
    if closed is not None:
        raise CacheClosed(f"{closed} is closed to other users, and the judge's sandboxed workers (user {iso.uid}) must "
                          f"reach {cache_dir}: chmod o+rx {closed}, or use a workspace elsewhere (-w)")


@functools.cache
def isolation() -> Isolation:
    """What this machine gives (probed once per process)."""
    problems: list[str] = []
    if os.environ.get(SWITCH_ENV) == "off":
        return Isolation(0, (), None, None, (f"the sandbox is switched off ({SWITCH_ENV}=off)",), enabled=False)
    if sys.platform != "linux":
        return Isolation(0, (), None, None, (f"workers are isolated on Linux only (this is {sys.platform})",))
    abi = landlock.abi_version()
    if abi < 1:
        problems.append("the kernel has no Landlock (Linux >= 5.13 with Landlock enabled): workers can read and write "
                        "whatever the judge's user can")
    flags, problem = _namespaces()
    if problem:
        problems.append(problem)
    uid, gid, problem = _worker_user()
    if problem:
        problems.append(problem)
    blocked = _unreadable_for_others([sys.executable, sys.prefix, sys.base_prefix, *sys.path[1:], str(_src_root())]) \
        if uid is not None else None
    # Another user cannot run this Python (it lies in root's home, say): workers stay root, with
    # no capability left (worker/confine.py), which Landlock and the namespaces then hold as they hold a user.
    return Isolation(abi, flags, None if blocked else uid, None if blocked else gid, tuple(problems), blocked)


@functools.cache
def warn_if_incomplete() -> None:
    """Say once per process, loudly, what isolation is missing."""
    iso = isolation()
    if not iso.complete:
        sys.stderr.write("kernelcraft: WARNING: candidates are NOT fully isolated on this machine: "
                         + "; ".join(iso.problems) + "\n")


def _src_root() -> Path:
    return Path(kernelcraft.__file__).resolve().parent.parent


def _is_within(path: Path, other: Path) -> bool:
    return path == other or other in path.parents


def _module_path(cache_dir: Path) -> list[str]:
    """The parent's module path for the worker, less what is not an installation: the current
    directory, and any directory holding the judge's cache (a project a test runner put there)."""
    cwd = Path.cwd().resolve()
    keep: list[str] = []
    for entry in [str(_src_root()), *sys.path]:
        if not entry or not os.path.isabs(entry) or not os.path.exists(entry) or entry in keep:
            continue
        p = Path(entry).resolve()
        if p == cwd or _is_within(cache_dir, p):
            continue
        keep.append(entry)
    return keep


def _readable(paths: list[str], cache_dir: Path) -> list[str]:
    """`paths` that exist, less any that would open the judge's cache (or the workspace around it) or
    the machine's device locks (a worker that held one would stall every judge)."""
    out: list[str] = []
    locks = machine_lock_dir().resolve()  # resolved as each path is (a temporary directory behind a link)
    for entry in paths:
        if not entry or not os.path.isabs(entry) or not os.path.exists(entry):
            continue
        p = Path(entry).resolve()
        if p == Path("/") or _is_within(cache_dir, p) or _is_within(locks, p) or str(p) in out:
            continue
        out.append(str(p))
    return out


def policy(module: str, scratch: Path, cache_dir: Path, read: tuple[Path, ...] = (), pid_namespace: bool = True,
           allow: Allowance = Allowance()) -> Policy:
    """The policy of a worker running `module` in `scratch`: `read` adds paths it may read, `allow` what else it
    may have. Without `pid_namespace` (a CUDA worker) it shares /dev/shm, where PyTorch's CUDA IPC keeps the reference
    counts of the outputs it hands to the trusted worker."""
    iso = isolation()
    keep = bool(allow.capabilities) and iso.enabled and os.geteuid() == 0
    uid, gid = (None, None) if keep else (iso.uid, iso.gid)
    cache_dir = cache_dir.resolve()
    sys_path = _module_path(cache_dir)
    path_dirs = os.environ.get("PATH", "").split(os.pathsep)
    toolchain = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).resolve().parent)]
    readable = _readable([*_SYSTEM_READ, *prefixes, *sys_path, *path_dirs, *toolchain], cache_dir)
    # Inside the cache: what the parent hands over, never the cache as a whole.
    readable += [str(p) for p in read if p.exists()]
    files = {f: landlock.READ_FILE | landlock.WRITE_FILE for pattern in _DEVICE_FILES for f in glob.glob(pattern)}
    private_shm = bool(iso.namespaces) and pid_namespace
    return Policy(module=module, sys_path=sys_path, read=readable,
                  write=[str(scratch)] + (["/dev/shm"] if private_shm or not pid_namespace else []), files=files,
                  uid=uid, gid=gid, private_shm=private_shm, landlock=iso.landlock_abi >= 1,
                  drop_capabilities=iso.enabled and uid is None, keep_capabilities=list(allow.capabilities) if keep else [],
                  loopback=bool(allow.tcp_ports) and "--net" in iso.namespaces, tcp_ports=list(allow.tcp_ports),
                  proc_tree=allow.proc_tree and pid_namespace and "--pid" in iso.namespaces)


_PID_NAMESPACE = ("--pid", "--fork", "--kill-child", "--mount-proc")


def command(args: list[str], pol: Policy, pid_namespace: bool = True) -> tuple[list[str], dict[str, str]]:
    """The argv a worker starts with, and what to add to its environment. Without `pid_namespace`
    (a CUDA worker: CUDA IPC, which hands outputs to the trusted worker, fails with "invalid device
    context" across PID namespaces) the worker is the process started, and what it leaves behind
    comes to the judge (sandbox.kill_leftovers)."""
    flags = [f for f in isolation().namespaces if pid_namespace or f not in _PID_NAMESPACE]
    if pol.private_shm and "--mount" not in flags and "--mount-proc" not in flags:
        flags.append("--mount")  # never mount over the machine's own /dev/shm
    return [*(["unshare", *flags] if flags else []), sys.executable, "-I", "-S", "-c", BOOT, *args], {ENV: pol.to_env()}


def hand_over(path: Path, uid: int | None, gid: int | None) -> None:
    """Make `path` (a new scratch directory, with what the judge put in it) the user's a worker becomes (its
    policy's `uid`; None: it stays the judge's user, who keeps it)."""
    if uid is None:
        return
    gid = gid if gid is not None else uid
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)
