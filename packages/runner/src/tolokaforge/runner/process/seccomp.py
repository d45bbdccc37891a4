"""The sandbox's seccomp filter: system calls untrusted code never needs, refused with EPERM.

Compiled once per runner with libseccomp (through ``pyseccomp``) into a BPF program that bubblewrap
loads (``--seccomp FD``) as the last step before it execs the sandboxed program. Every process in the
sandbox inherits it -- a zygote's forked workers too -- and no process can remove it.

What is refused, and why:

- reaching into another process: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``, ``kcmp``;
- leaving or reshaping the sandbox: ``setns``, ``unshare``, ``clone`` with any namespace flag,
  ``mount`` and the new mount API, ``umount2``, ``pivot_root``, ``chroot``;
- kernel attack surface no tool needs: ``keyctl``/``add_key``/``request_key``, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring_*``, ``open_by_handle_at``, module loading,
  ``kexec``, ``reboot``, ``swapon/off``, ``syslog``, ``acct``, ``quotactl``, ``iopl/ioperm``;
- ``clone3`` answers ENOSYS: its flags sit in memory a filter cannot read, and C libraries fall back to
  ``clone``, whose flags it can;
- ``ioctl(TIOCSTI)`` / ``TIOCLINUX``: pushing keystrokes into a terminal outside.
"""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

__all__ = ["REFUSED", "write_filter"]

REFUSED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "setns",
    "unshare",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "iopl",
    "ioperm",
    "lookup_dcookie",
)

_CLONE_NAMESPACES = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (and CLONE_NEWTIME below)."""
_CLONE_NEWTIME = 0x00000080
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C


_COMPILED: list[bytes] = []
"""The program, compiled once per process (libseccomp's import and compilation cost some 30 ms)."""


def write_filter(path: Path) -> Path:
    """Write the filter's BPF program to ``path`` (read by bubblewrap at each start)."""
    if not _COMPILED:
        _COMPILED.append(_compile())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_COMPILED[0])
    return path


def _compile() -> bytes:
    import pyseccomp as seccomp  # pyright: ignore[reportMissingTypeStubs] # the runner's side only: the sandbox receives the compiled program

    refuse = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in REFUSED:
        try:
            rules.add_rule(refuse, name)
        except (OSError, ValueError, RuntimeError):
            continue  # a call this architecture does not have
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for bit in range(32):
        mask = 1 << bit
        if (_CLONE_NAMESPACES | _CLONE_NEWTIME) & mask:
            rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, mask, mask))
    for request in (_TIOCSTI, _TIOCLINUX):
        rules.add_rule(refuse, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()
