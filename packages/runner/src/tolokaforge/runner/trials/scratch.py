"""Where a runner keeps its scratch files: trial workspaces, worker logs, code bundles, zygote sockets.

Every trial creates and deletes a workspace directory and a worker log. On a disk filesystem that
churn is not free: ext4 without a journal, for one, scans past every inode deleted in the last
minutes on each new file, and a busy runner deletes thousands (measured: a sixth of the machine's
CPU in a golden run, docs/performance.md). The files are transient, so a memory filesystem suits
them: ``/dev/shm`` is chosen when it is a writable tmpfs with room to spare, unless ``TMPDIR`` says
where temporary files go. A small ``/dev/shm`` (a container's 64 MB) is left alone, since a tool
filling it would fail where the disk would not. A runner killed outright leaves its directory behind;
the next runner started under the same parent removes it (:func:`sweep_abandoned`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = [
    "LOCK_NAME",
    "MIN_FREE_BYTES",
    "PREFIX",
    "Scratch",
    "filesystem_type",
    "new_scratch",
    "scratch_parent",
    "sweep_abandoned",
]

PREFIX = "tolokaforge-runner-"
LOCK_NAME = ".owner.lock"

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


class Scratch(tempfile.TemporaryDirectory[str]):
    """A runner's scratch directory, holding an exclusive lock on its ``.owner.lock`` while it lives.

    A runner killed outright cannot remove its directory; in a memory file system that would keep
    costing memory. The lock dies with the process, so the next runner to start under the same parent
    removes every directory whose lock it can take (:func:`sweep_abandoned`).
    """

    def __init__(self, parent: Path) -> None:
        super().__init__(prefix=PREFIX, dir=parent)
        self._lock = os.open(Path(self.name) / LOCK_NAME, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def cleanup(self) -> None:
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1
        super().cleanup()


def new_scratch() -> Scratch:
    """A new scratch directory under :func:`scratch_parent` (abandoned ones removed first)."""
    parent = scratch_parent()
    sweep_abandoned(parent)
    return Scratch(parent)


def sweep_abandoned(parent: Path, *, grace_s: float = 60.0) -> list[Path]:
    """Remove the runner scratch directories under ``parent`` whose runner is gone; return them.

    Gone: nobody holds the directory's lock. A directory with no lock file yet (a runner between
    making it and locking it) is left alone for ``grace_s`` seconds.
    """
    removed: list[Path] = []
    try:
        candidates = [entry for entry in parent.iterdir() if entry.name.startswith(PREFIX)]
    except OSError:
        return removed
    now = time.time()
    for directory in candidates:
        try:
            lock = os.open(directory / LOCK_NAME, os.O_WRONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            try:
                if now - directory.stat().st_mtime > grace_s:
                    shutil.rmtree(directory, ignore_errors=True)
                    removed.append(directory)
            except OSError:
                pass
            continue
        except OSError:
            continue  # not ours to judge (another user's, say)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its runner is alive
        finally:
            os.close(lock)
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    return removed
