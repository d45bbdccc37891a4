"""Where a runner keeps its scratch files: trial workspaces, worker logs, code bundles, zygote sockets.

Every trial creates and deletes a workspace directory and a worker log. On a disk filesystem that
churn is not free: ext4 without a journal, for one, scans past every inode deleted in the last
minutes on each new file, and a busy runner deletes thousands (measured: a sixth of the machine's
CPU in a golden run, docs/performance.md). The files are transient, so a memory filesystem suits
them: ``/dev/shm`` is chosen when it is a writable tmpfs with room to spare, unless ``TMPDIR`` says
where temporary files go. A small ``/dev/shm`` (a container's 64 MB) is left alone, since a tool
filling it would fail where the disk would not.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["MIN_FREE_BYTES", "filesystem_type", "new_scratch", "scratch_parent"]

MIN_FREE_BYTES = 1 << 30
"""The room a memory filesystem must have free to hold a runner's scratch."""

_SHM = Path("/dev/shm")


def scratch_parent(environ: dict[str, str] | None = None, shm: Path = _SHM) -> Path:
    """The directory a runner's scratch directory is made in (see the module's docstring)."""
    env = os.environ if environ is None else environ
    if env.get("TMPDIR"):
        return Path(tempfile.gettempdir())
    if _is_roomy_tmpfs(shm):
        return shm
    return Path(tempfile.gettempdir())


def _is_roomy_tmpfs(path: Path) -> bool:
    try:
        stats = os.statvfs(path)
    except OSError:
        return False
    if stats.f_bavail * stats.f_frsize < MIN_FREE_BYTES or not os.access(path, os.W_OK | os.X_OK):
        return False
    return filesystem_type(path) == "tmpfs"


def filesystem_type(path: Path) -> str | None:
    """The type /proc/self/mounts gives the mount ``path`` is on, or None where there is no such file."""
    try:
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    target = os.path.realpath(path)
    best: tuple[int, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > best[0]):
            best = (len(point), fields[2])
    return None if best is None else best[1]


def new_scratch() -> tempfile.TemporaryDirectory[str]:
    """A new scratch directory under :func:`scratch_parent`, removed by its ``cleanup()``."""
    return tempfile.TemporaryDirectory(prefix="tolokaforge-runner-", dir=scratch_parent())
