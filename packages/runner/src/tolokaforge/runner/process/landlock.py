"""Landlock: the kernel's unprivileged file-system (and TCP, and scope) wall, applied by a process to itself.

Standard library only: it runs inside the sandbox, in the launcher and in every forked worker, before
pack code. The one Landlock binding on PyPI (``landlock``, a 1.0 dev release) handles file-system rights
alone -- no TCP rules, no signal or abstract-socket scopes, which keep two workers of one zygote apart --
and imports ``dataclasses`` (20 ms per sandbox start). The kernel interface is three system calls with
two small structures (Documentation/userspace-api/landlock.rst), so it is spoken here directly.

A ruleset lists what is *handled* (everything this kernel's ABI knows); anything handled and not
granted by a rule is refused. Domains stack: a forked worker's own ruleset narrows its zygote's.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["abi_version", "restrict"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = {
    "x86_64": (444, 445, 446),
    "aarch64": (444, 445, 446),
}.get(platform.machine(), (444, 445, 446))
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# File-system rights by the ABI version that introduced them.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_WRITE = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_SYM
    | _REFER
    | _TRUNCATE
    | _IOCTL_DEV
)
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _NetPort(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_RULE_NET_PORT = 2


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def restrict(
    read: list[str], write: list[str], *, network: bool, abi: int = 0, connect_ports: tuple[int, ...] = ()
) -> str:
    """Confine this process (and what it execs or forks later) to ``read`` (read, list, execute) and
    ``write`` (all of that plus create, remove, write) beneath those paths; no TCP bind or connect unless
    ``network`` (but connects to ``connect_ports``); no signals or abstract unix sockets out of the domain.

    Returns what holds (``"abi N"``) or raises OSError. Paths that do not exist are skipped.
    """
    abi = abi or abi_version()
    if abi < 1:
        raise OSError(95, "Landlock is not available on this kernel")
    handled_fs = _FS_BY_ABI[max(v for v in _FS_BY_ABI if v <= abi)]
    attr = _RulesetAttr(handled_fs, 0, 0)
    size = ctypes.sizeof(ctypes.c_uint64)  # ABI 1-3 know the first field only
    if abi >= 4:
        attr.handled_access_net = 0 if network else _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 2 * ctypes.sizeof(ctypes.c_uint64)
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = ctypes.sizeof(_RulesetAttr)
    libc = _libc()
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise _error("landlock_create_ruleset")
    try:
        for paths, access in ((read, _READ), (write, _READ | _WRITE)):
            for path in paths:
                _allow(libc, ruleset, path, access & handled_fs)
        if abi >= 4 and not network:
            for port in connect_ports:
                rule = _NetPort(_NET_CONNECT_TCP, port)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(rule), 0) != 0:
                    raise _error(f"landlock_add_rule(tcp connect {port})")
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _error("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise _error("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return f"abi {abi}"


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            # A rule on a file may grant only the rights that apply to files.
            access &= _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
        rule = _PathBeneath(access, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise _error(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _error(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")
