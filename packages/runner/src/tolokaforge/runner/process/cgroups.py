"""One cgroup per trial: its processes' memory, process count and CPU weight, counted together.

Resource limits (RLIMIT_*) are per process (or, for the process count, per user): a trial could hold
many times its memory limit across children, and a fork bomb in one trial starves the next. A cgroup
counts every process of the trial together, and lists them all, so cleanup kills each one -- a
double-forked daemon included.

Both hierarchies are spoken: cgroup v2 where the unified hierarchy carries the memory and pids
controllers, else the v1 controllers (``memory``, ``pids``, ``cpu``) mounted one per directory, as on
machines whose container runtime predates v2. The runner's tree lives under its own cgroup
(``tolokaforge-<pid>-<random>``), so it nests inside whatever confines the runner, and is removed at close.
Writing a cgroup needs root or a delegated subtree: where neither holds, :func:`detect` says why.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from pathlib import Path

__all__ = ["CgroupTree", "TrialCgroup", "detect"]

_ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpu")
_KILL_ROUNDS = 50


class TrialCgroup:
    """One trial's cgroup (a directory per v1 controller, one in v2)."""

    def __init__(self, directories: list[Path], version: int) -> None:
        self.directories = directories
        self.version = version
        self.key: tuple[int, int, int] = (0, 0, 0)
        """The limits it was made with (memory, pids, CPU weight): a pooled cgroup serves only those."""

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid into to join (a launcher does, before it execs)."""
        return [str(directory / "cgroup.procs") for directory in self.directories]

    def add(self, pid: int) -> None:
        """Move ``pid`` (a process the zygote forked) into the trial's cgroup."""
        for procs in self.procs_files:
            with open(procs, "w") as out:
                out.write(str(pid))

    def holds(self, pid: int) -> bool:
        """Whether ``pid`` (in the runner's pid namespace) is one of the trial's processes."""
        try:
            text = (self.directories[0] / "cgroup.procs").read_text()
        except OSError:
            return False
        return str(pid) in text.split()

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.directories:
            with contextlib.suppress(OSError):
                found.update(int(line) for line in (directory / "cgroup.procs").read_text().split())
        return found

    def kill_all(self) -> int:
        """SIGKILL every process of the trial until none is left (a fork racing the kill is caught by the next round)."""
        killed = 0
        for _ in range(_KILL_ROUNDS):
            if self.version == 2 and (self.directories[0] / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (self.directories[0] / "cgroup.kill").write_text("1")
            pids = self.pids()
            if not pids:
                return killed
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.001)
        return killed

    def remove(self) -> None:
        """Kill what is left and remove the directories (a cgroup with a process in it cannot be removed)."""
        self.kill_all()
        for directory in self.directories:
            for _ in range(100):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # the last processes are still exiting
                    time.sleep(0.002)


_POOLED = 128
"""Emptied trial cgroups kept for the next trials: making one costs a v1 memory cgroup's setup."""


class CgroupTree:
    """The runner's cgroup subtree: one directory per controller (v1) or one (v2)."""

    def __init__(self, bases: list[Path], version: int) -> None:
        self.bases = bases
        self.version = version
        self._count = 0
        self._pool: dict[tuple[int, int, int], list[TrialCgroup]] = {}
        self._lock = threading.Lock()
        """Trials are released on threads (the kill waits) and acquired on the event loop."""

    def acquire(self, name: str, *, memory_bytes: int, pids: int, cpu_weight: int = 100) -> TrialCgroup:
        """An empty cgroup with these limits: one a finished trial left, or a new one."""
        key = (memory_bytes, pids, cpu_weight)
        with self._lock:
            pooled = self._pool.get(key)
            if pooled:
                return pooled.pop()
        group = self.create(name, memory_bytes=memory_bytes, pids=pids, cpu_weight=cpu_weight)
        group.key = key
        return group

    def release(self, group: TrialCgroup) -> None:
        """Kill every process left in ``group``; keep it for the next trial, or remove it.

        Blocking (it waits for the killed to leave): run it off the event loop.
        """
        group.kill_all()
        with self._lock:
            pooled = self._pool.setdefault(group.key, [])
            kept = group.key != (0, 0, 0) and not group.pids() and len(pooled) < _POOLED
            if kept:
                pooled.append(group)
        if not kept:
            group.remove()

    def create(self, name: str, *, memory_bytes: int, pids: int, cpu_weight: int = 100) -> TrialCgroup:
        """A new cgroup ``name`` under the runner's, with its limits written."""
        with self._lock:
            self._count += 1
            leaf = f"{name}-{self._count}"
        directories = [base / leaf for base in self.bases]
        for directory in directories:
            directory.mkdir()
        group = TrialCgroup(directories, self.version)
        try:
            if self.version == 2:
                only = directories[0]
                (only / "memory.max").write_text(str(memory_bytes))
                with contextlib.suppress(FileNotFoundError):
                    (only / "memory.swap.max").write_text("0")
                (only / "pids.max").write_text(str(pids))
                with contextlib.suppress(FileNotFoundError):
                    (only / "cpu.weight").write_text(str(cpu_weight))
            else:
                memory, pid_dir, cpu = directories
                (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
                (pid_dir / "pids.max").write_text(str(pids))
                (cpu / "cpu.shares").write_text(str(cpu_weight * 1024 // 100))
        except OSError:
            group.remove()
            raise
        return group

    def close(self) -> None:
        with self._lock:
            self._pool.clear()
        for base in self.bases:
            for child in list(base.iterdir()) if base.is_dir() else []:
                if child.is_dir():
                    TrialCgroup([child], self.version).remove()
            with contextlib.suppress(OSError):
                base.rmdir()


def detect() -> tuple[CgroupTree | None, str]:
    """The runner's cgroup tree (created now), or None and why not; the second value says what holds."""
    own = _own_cgroups()
    name = f"tolokaforge-{os.getpid()}-{secrets.token_hex(4)}"  # several runners may share a process
    unified = _ROOT / "cgroup.controllers"
    if unified.exists():
        controllers = unified.read_text().split()
        if "memory" not in controllers or "pids" not in controllers:
            return None, "unavailable (cgroup v2 without the memory and pids controllers)"
        base = _ROOT / own.get("", "/").lstrip("/") / name
        try:
            base.mkdir()
            (base / "cgroup.subtree_control").write_text(
                "+memory +pids" + (" +cpu" if "cpu" in controllers else "")
            )
        except OSError as error:
            with contextlib.suppress(OSError):
                base.rmdir()
            return (
                None,
                f"unavailable (cgroup v2 is not writable here: {error.strerror}; run as root or delegate a subtree)",
            )
        return CgroupTree([base], 2), "v2"
    bases: list[Path] = []
    for controller in _V1_CONTROLLERS:
        mount = _ROOT / controller
        if not (mount / "cgroup.procs").exists():
            return None, f"unavailable (no cgroup v1 '{controller}' controller mounted at {mount})"
        bases.append(mount / own.get(controller, "/").lstrip("/") / name)
    made: list[Path] = []
    try:
        for base in bases:
            base.mkdir()
            made.append(base)
    except OSError as error:
        for base in made:
            with contextlib.suppress(OSError):
                base.rmdir()
        return None, f"unavailable (cgroup v1 is not writable here: {error.strerror}; run as root)"
    return CgroupTree(bases, 1), "v1 (memory, pids, cpu)"


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller ('' for v2)."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own
