"""Worker side of the sandbox: the first code of every worker process, before anything a candidate
can influence. It applies the parent's `Policy` (a private /dev/shm, another user, Landlock) and
only then runs the worker module. Standard library only.

The process starts as `python -I -S -c BOOT`: no environment variables of Python's, no user site,
no `.pth` file anywhere (a file planted where Python reads it at start-up patched later processes),
and exactly the module path the parent chose. A Python process that a tool started inside the sandbox
(ncu starting the profile driver) starts as `python_command` says: as isolated, with the same module
path, and inheriting the confinement, which `child` checks.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import runpy
import socket
import struct
import sys
from dataclasses import asdict, dataclass, field

from .landlock import Ruleset

ENV = "KERNELCRAFT_CONFINE"
BOOT = (f"import json,os,sys;sys.path[:]=json.loads(os.environ['{ENV}'])['sys_path'];"
        "from kernelcraft.judge.worker.confine import main;main()")
PATH_ENV = "KERNELCRAFT_SYS_PATH"  # the module path, for the Python processes a confined process's tool starts
CHILD_ENV = "KERNELCRAFT_CHILD_CONFINE"  # the policy, for those processes to confine themselves again (child)
CHILD_BOOT = (f"import json,os,sys;sys.path[:]=json.loads(os.environ['{PATH_ENV}']);"
              "from kernelcraft.judge.worker.confine import child;child()")
_MS_NOSUID, _MS_NODEV = 2, 4
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAPABILITY_VERSION_3 = 0x20080522


@dataclass
class Policy:
    """What a worker may reach. `uid`/`gid`: the user it becomes (None: it stays the judge's user, and
    where that is root, root without capabilities but `keep_capabilities`);
    `private_shm`: it has a mount namespace of its own, where /dev/shm is mounted afresh;
    `loopback`: its network namespace's loopback is brought up (it has no other interface), where
    `tcp_ports` are the ports Landlock lets it bind and connect to (the ncu pass: ncu's own connection
    to the process it profiles); `proc_tree`: it may write its whole /proc, its PID namespace's own, not only its
    own entry, since the processes it starts write theirs (the CUDA driver does as it starts; the ncu pass),
    and each Python process it starts confines itself again to its own entry (`child`)."""

    module: str
    sys_path: list[str]
    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)
    uid: int | None = None
    gid: int | None = None
    private_shm: bool = False
    landlock: bool = True
    drop_capabilities: bool = True  # where it stays root
    keep_capabilities: list[int] = field(default_factory=list)
    loopback: bool = False
    tcp_ports: list[int] = field(default_factory=list)
    proc_tree: bool = False

    def to_env(self) -> str:
        return json.dumps(asdict(self))


def _mount_private_shm() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777") != 0:
        raise OSError(ctypes.get_errno(), "mounting a private /dev/shm failed")


def _loopback_up() -> None:
    """Bring up the loopback of this process's own network namespace (down in a new one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        name = b"lo".ljust(16, b"\0")
        flags = struct.unpack("16sh", fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack("16sh", name, 0)))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", name, flags | _IFF_UP))


def _drop_capabilities(keep: list[int]) -> None:
    """Root without any capability but `keep`: no override of file permissions, no mounts, no raw sockets; what
    it starts gets no other back (the bounding set holds `keep` alone, which a root program's exec gets)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        if cap not in keep and libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), f"dropping capability {cap} from the bounding set failed")
    low = sum(1 << c for c in keep if c < 32)
    high = sum(1 << (c - 32) for c in keep if c >= 32)
    header = struct.pack("Ii", _CAPABILITY_VERSION_3, 0)
    # effective, permitted and inheritable, for capabilities 0-31 and then 32-63
    if libc.capset(header, struct.pack("6I", low, low, 0, high, high, 0)) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def apply(policy: Policy) -> None:
    """Confine this process for good: what it starts inherits all of it."""
    if policy.private_shm:
        _mount_private_shm()
    if policy.loopback:
        _loopback_up()
    if os.geteuid() == 0:
        if policy.uid is not None:
            gid = policy.gid if policy.gid is not None else policy.uid
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(policy.uid, policy.uid, policy.uid)
        elif policy.drop_capabilities:
            _drop_capabilities(policy.keep_capabilities)
    # Marks every process of the sandbox for good (sandbox.kill_leftovers), and no set-user-id program
    # gives any of them privileges back.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if policy.landlock:
        # Its own /proc entry: the CUDA driver writes there as it starts (cudaGetDeviceCount fails with
        # "OS call failed" otherwise, on H100 machines).
        own = "/proc" if policy.proc_tree else f"/proc/{os.getpid()}"
        Ruleset(policy.read, [*policy.write, own], policy.files, policy.tcp_ports).restrict_self()
    os.environ[CHILD_ENV] = policy.to_env()


def _confine_child() -> None:
    """A Python process a confined tool started: Landlock again, on top of what it inherited, with its own
    /proc entry the only one it may write (its parent's policy may have given the whole /proc, for the
    processes it starts: `Policy.proc_tree`)."""
    policy = Policy(**json.loads(os.environ[CHILD_ENV]))
    if policy.landlock:
        Ruleset(policy.read, [*policy.write, f"/proc/{os.getpid()}"], policy.files, policy.tcp_ports).restrict_self()


def _confined() -> bool:
    """This process carries the sandbox's mark (no_new_privs, set by `apply` and never cleared)."""
    with open("/proc/self/status") as f:
        return "\nNoNewPrivs:\t1" in f.read()


def python_command(module: str, args: list[str]) -> list[str]:
    """The command line of a Python process that a tool run confined starts (ncu, the profile driver):
    isolated as the confined process was, its module path the same, `module` run as __main__ with `args`.
    It inherits the confinement of the process that started the tool."""
    return [sys.executable, "-I", "-S", "-c", CHILD_BOOT, module, *args]


def main() -> None:
    """BOOT's entry: confine, then run `policy.module` as __main__ with the remaining arguments."""
    policy = Policy(**json.loads(os.environ.pop(ENV)))
    try:
        apply(policy)
    except OSError as e:  # never run a candidate less confined than the parent decided
        sys.stderr.write(f"kernelcraft: the worker could not be confined: {e}\n")
        os._exit(70)
    os.environ[PATH_ENV] = json.dumps(policy.sys_path)
    _run(policy.module, sys.argv[1:])


def child() -> None:
    """CHILD_BOOT's entry: run argv[1] as __main__ with the remaining arguments, in a process started inside
    the sandbox; anywhere else it refuses to run."""
    if not _confined() or CHILD_ENV not in os.environ:
        sys.stderr.write("kernelcraft: a sandboxed process's child started outside the sandbox\n")
        os._exit(70)
    try:
        _confine_child()
    except OSError as e:
        sys.stderr.write(f"kernelcraft: a sandboxed process's child could not be confined: {e}\n")
        os._exit(70)
    _run(sys.argv[1], sys.argv[2:])


def _run(module: str, args: list[str]) -> None:
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
