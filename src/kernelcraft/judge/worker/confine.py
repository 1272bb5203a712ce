"""Worker side of the sandbox: the first code of every worker process, before anything a candidate
can influence. It applies the parent's `Policy` (a private /dev/shm, another user, Landlock) and
only then runs the worker module. Standard library only.

The process starts as `python -I -S -c BOOT`: no environment variables of Python's, no user site,
no `.pth` file anywhere (a file planted where Python reads it at start-up patched later processes),
and exactly the module path the parent chose.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import runpy
import struct
import sys
from dataclasses import asdict, dataclass, field

from .landlock import Ruleset

ENV = "KERNELCRAFT_CONFINE"
BOOT = (f"import json,os,sys;sys.path[:]=json.loads(os.environ['{ENV}'])['sys_path'];"
        "from kernelcraft.judge.worker.confine import main;main()")
_MS_NOSUID, _MS_NODEV = 2, 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAPABILITY_VERSION_3 = 0x20080522


@dataclass
class Policy:
    """What a worker may reach. `uid`/`gid`: the user it becomes (None: it stays the judge's user, and
    where that is root, root without capabilities);
    `private_shm`: it has a mount namespace of its own, where /dev/shm is mounted afresh."""

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

    def to_env(self) -> str:
        return json.dumps(asdict(self))


def _mount_private_shm() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777") != 0:
        raise OSError(ctypes.get_errno(), "mounting a private /dev/shm failed")


def _drop_capabilities() -> None:
    """Root without any capability: no override of file permissions, no mounts, no raw sockets; what
    it starts gets none back (an empty bounding set)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), f"dropping capability {cap} from the bounding set failed")
    header = struct.pack("Ii", _CAPABILITY_VERSION_3, 0)
    if libc.capset(header, bytes(24)) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def apply(policy: Policy) -> None:
    """Confine this process for good: what it starts inherits all of it."""
    if policy.private_shm:
        _mount_private_shm()
    if os.geteuid() == 0:
        if policy.uid is not None:
            gid = policy.gid if policy.gid is not None else policy.uid
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(policy.uid, policy.uid, policy.uid)
        elif policy.drop_capabilities:
            _drop_capabilities()
    # Marks every process of the sandbox for good (sandbox.kill_leftovers), and no set-user-id program
    # gives any of them privileges back.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if policy.landlock:
        # Its own /proc entry: the CUDA driver writes there as it starts (cudaGetDeviceCount fails with
        # "OS call failed" otherwise, on H100 machines).
        Ruleset(policy.read, [*policy.write, f"/proc/{os.getpid()}"], policy.files).restrict_self()


def main() -> None:
    """BOOT's entry: confine, then run `policy.module` as __main__ with the remaining arguments."""
    policy = Policy(**json.loads(os.environ.pop(ENV)))
    try:
        apply(policy)
    except OSError as e:  # never run a candidate less confined than the parent decided
        sys.stderr.write(f"kernelcraft: the worker could not be confined: {e}\n")
        os._exit(70)
    sys.argv = [policy.module, *sys.argv[1:]]
    runpy.run_module(policy.module, run_name="__main__", alter_sys=True)
