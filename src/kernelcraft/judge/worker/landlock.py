"""Landlock (Linux >= 5.13) through its three system calls: a process restricts itself, and every
process it starts, to the paths it lists. Runs in the worker before any candidate code; standard
library only. https://docs.kernel.org/userspace-api/landlock.html"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass, field

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on x86_64 and aarch64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE = sum(1 << b for b in range(4, 13))  # remove dir/file, make char/dir/reg/sock/fifo/block/sym
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
READ = EXECUTE | READ_FILE | READ_DIR
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a file (not a directory) may hold
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class LandlockError(OSError):
    pass


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (too old, or switched off)."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(v), 0)


def _fs_rights(abi: int) -> int:
    rights = READ | WRITE_FILE | _MAKE
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


@dataclass
class Ruleset:
    """What the process may still reach once restricted: `read` paths (read, list, execute),
    `write` paths (everything beneath them), `files` (single files with their own rights), and
    `tcp_ports`, the TCP ports it may bind and connect to (ABI 4; none otherwise)."""

    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)
    tcp_ports: list[int] = field(default_factory=list)

    def restrict_self(self) -> int:
        """Apply the ruleset to this process (and what it starts): returns the ABI used. Raises
        LandlockError where the kernel has no Landlock. TCP bind and connect are denied but on
        `tcp_ports` (ABI 4), and so are abstract Unix sockets and signals to processes outside the sandbox (ABI 6)."""
        abi = abi_version()
        if abi < 1:
            raise LandlockError(0, "this kernel has no Landlock")
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        handled = _fs_rights(abi)
        attr = struct.pack("Q", handled)
        if abi >= 4:
            attr += struct.pack("Q", _NET_BIND_TCP | _NET_CONNECT_TCP)
        if abi >= 6:
            attr += struct.pack("Q", _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
        fd = libc.syscall(_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
        if fd < 0:
            raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
        try:
            for path in self.read:
                self._add(libc, fd, path, READ & handled)
            for path in self.write:
                self._add(libc, fd, path, handled)
            for path, rights in self.files.items():
                self._add(libc, fd, path, rights & handled & _FILE_ONLY)
            for port in self.tcp_ports if abi >= 4 else []:
                rule = struct.pack("=QQ", _NET_BIND_TCP | _NET_CONNECT_TCP, port)
                if libc.syscall(_ADD_RULE, fd, ctypes.c_uint32(_RULE_NET_PORT), rule, ctypes.c_uint32(0)) != 0:
                    raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for TCP port {port}")
            if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
            if libc.syscall(_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
                raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
        finally:
            os.close(fd)
        return abi

    @staticmethod
    def _add(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a path this machine does not have grants nothing
        try:
            if not os.path.isdir(path):
                rights &= _FILE_ONLY
            rule = struct.pack("=Qi", rights, pfd)
            if libc.syscall(_ADD_RULE, ruleset, ctypes.c_uint32(_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)) != 0:
                raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(pfd)
