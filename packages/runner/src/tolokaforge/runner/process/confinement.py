"""The sandbox every process running code we did not write starts in, and what this machine gives it.

One :class:`Confinement` per runner. At start it finds out which layers hold here -- bubblewrap and the
namespaces it makes, seccomp, Landlock, a writable cgroup tree -- and refuses to start when one is
missing, unless the user named that layer in ``without`` or chose ``--isolation process`` (never a
silent downgrade). Each child is then started as::

    [sh -c 'join the cgroup; exec "$@"'] bwrap NAMESPACES MOUNTS --seccomp FD -- python -I LAUNCHER SPEC -- ARGV

bubblewrap builds the walls outside the process (new user, pid, ipc, uts, mount, cgroup and network
namespaces; read-only system, interpreter and pack; one writable workspace; a private ``/tmp`` and
``/proc``; no capabilities; death with its parent; a new session; the seccomp filter), and the
launcher (process/sandbox.py), still our code, takes the last steps from inside: resource limits, an
unprivileged uid when bubblewrap ran as root, Landlock as a second wall on the file system.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import subprocess
import sys
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import landlock, sandbox
from .cgroups import CgroupTree, TrialCgroup
from .cgroups import detect as detect_cgroups
from .sandbox import Limits

__all__ = [
    "LAYERS",
    "SANDBOX_UID",
    "Confinement",
    "Launch",
    "Level",
    "SandboxUnavailable",
    "View",
]

Level = Literal["sandbox", "process"]

LAYERS = ("bubblewrap", "seccomp", "landlock", "cgroup")
"""The layers a sandbox is built of; ``without`` may name any of them."""

SANDBOX_UID = 65534
"""The uid sandboxed code runs as when the runner is root (``nobody``): it owns nothing outside."""

_ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "passwd",
    "ssl",
)
"""What of /etc a program needs to start (libraries, names, certificates); no secrets live here."""

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class SandboxUnavailable(Exception):
    """A layer the sandbox needs is missing on this machine; the message names it and the flag that accepts it."""


@dataclass(frozen=True)
class View:
    """What one sandbox sees besides the system: its working directory and the paths it may read or write."""

    cwd: Path
    """The working directory: inside one of ``write`` or ``read``."""
    write: tuple[Path, ...] = ()
    """Bound read-write at the same path (the trial's workspace; a zygote's directory)."""
    read: tuple[Path, ...] = ()
    """Bound read-only at the same path (the pack's code, a task's initial state)."""
    cgroup: TrialCgroup | None = None
    """The trial's cgroup, which the child joins before bubblewrap starts."""
    relay: tuple[int, Path] | None = None
    """A loopback port in the sandbox that leads to this unix socket (bound in: its directory is in ``write``)."""
    binds: tuple[tuple[Path, str], ...] = ()
    """Bound read-write at another path (source, path inside): a verifier's fixed ``/tests``, ``/logs``."""


SECCOMP_FD = "{seccomp-fd}"
"""Stands in a :class:`Launch`'s argv for the descriptor of the seccomp program, opened at each spawn."""


@dataclass(frozen=True)
class Launch:
    """A command line ready to spawn (as often as needed: a server restarted after a crash)."""

    argv: tuple[str, ...]
    seccomp_file: Path | None = None
    sandboxed: bool = False
    """Started through bubblewrap (its exit code says 128 + N for a death by signal N)."""

    @contextlib.contextmanager
    def opened(self) -> Generator[tuple[list[str], tuple[int, ...]]]:
        """The argv to spawn and the descriptors the child must inherit, open for the spawn's time."""
        if self.seccomp_file is None:
            yield list(self.argv), ()
            return
        # Opened anew each time: bubblewrap reads the program from the descriptor's offset.
        fd = os.open(self.seccomp_file, os.O_RDONLY | os.O_CLOEXEC)
        try:
            yield [str(fd) if part == SECCOMP_FD else part for part in self.argv], (fd,)
        finally:
            os.close(fd)


class Confinement:
    """How this runner confines children, and what holds on this machine (by layer)."""

    def __init__(
        self,
        level: Level,
        report: dict[str, str],
        *,
        bwrap: str | None = None,
        seccomp_file: Path | None = None,
        landlock_abi: int = 0,
        cgroups: CgroupTree | None = None,
    ) -> None:
        self.level: Level = level
        self.report = report
        """Per layer, what holds here (or why not): HealthCheck and the run manifest show it."""
        self.bwrap = bwrap
        self.seccomp_file = seccomp_file
        self.landlock_abi = landlock_abi
        self.cgroups = cgroups
        self.root = os.geteuid() == 0
        self._system_read = _system_paths()

    @classmethod
    def process(cls) -> Confinement:
        """``--isolation process``: the weaker level, chosen explicitly (limits and a private network only)."""
        return cls("process", {"sandbox": "off (--isolation process)"})

    @classmethod
    def detect(cls, work_dir: Path, *, without: Iterable[str] = ()) -> Confinement:
        """Find out what holds here; raise SandboxUnavailable when a layer not in ``without`` is missing."""
        skipped = set(without)
        unknown = skipped - set(LAYERS)
        if unknown:
            raise SandboxUnavailable(
                f"unknown sandbox layer(s) {sorted(unknown)}: the layers are {', '.join(LAYERS)}"
            )
        report: dict[str, str] = {}
        missing: list[str] = []
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            report["bubblewrap"] = "unavailable (no bwrap on PATH: install the 'bubblewrap' package)"
        else:
            report["bubblewrap"] = _probe_bwrap(bwrap)
        if not report["bubblewrap"].startswith("ok"):
            raise SandboxUnavailable(
                f"the sandbox needs bubblewrap: {report['bubblewrap']}. Install it (Debian: apt install "
                "bubblewrap), or choose the weaker level explicitly with --isolation process"
            )
        seccomp_file: Path | None = None
        if "seccomp" in skipped:
            report["seccomp"] = "off (--without seccomp)"
        else:
            try:
                from .seccomp import write_filter

                seccomp_file = write_filter(work_dir / "sandbox" / "seccomp.bpf")
                report["seccomp"] = "on"
            except (OSError, ImportError, RuntimeError) as error:
                report["seccomp"] = f"unavailable ({type(error).__name__}: {error})"
                missing.append("seccomp")
        abi = 0
        if "landlock" in skipped:
            report["landlock"] = "off (--without landlock)"
        else:
            abi = landlock.abi_version()
            report["landlock"] = f"abi {abi}" if abi else "unavailable (the kernel has no Landlock)"
            if not abi:
                missing.append("landlock")
        cgroups: CgroupTree | None = None
        if "cgroup" in skipped:
            report["cgroup"] = "off (--without cgroup)"
        else:
            cgroups, what = detect_cgroups()
            report["cgroup"] = what
            if cgroups is None:
                missing.append("cgroup")
        if missing:
            if cgroups is not None:
                cgroups.close()
            raise SandboxUnavailable(
                "the sandbox is missing layer(s) here: "
                + "; ".join(f"{name}: {report[name]}" for name in missing)
                + ". Accept it explicitly with "
                + " ".join(f"--without {name}" for name in missing)
                + ", or choose --isolation process"
            )
        report["uid"] = (
            str(SANDBOX_UID) if os.geteuid() == 0 else f"{os.geteuid()} (the runner's; a user namespace)"
        )
        return cls(
            "sandbox", report, bwrap=bwrap, seccomp_file=seccomp_file, landlock_abi=abi, cgroups=cgroups
        )

    @property
    def sandboxed(self) -> bool:
        return self.level == "sandbox"

    def close(self) -> None:
        if self.cgroups is not None:
            self.cgroups.close()
            self.cgroups = None

    def trial_cgroup(self, name: str, limits: Limits) -> TrialCgroup | None:
        """A cgroup for one trial (or zygote) under the runner's, or None where cgroups are off."""
        if self.cgroups is None:
            return None
        return self.cgroups.acquire(name, memory_bytes=limits.memory_bytes, pids=limits.processes)

    def release_cgroup(self, group: TrialCgroup) -> None:
        """Kill every process left in a trial's cgroup and give it back (blocking: off the event loop)."""
        if self.cgroups is not None:
            self.cgroups.release(group)
        else:
            group.remove()

    def covers(self, path: str) -> bool:
        """Whether every sandbox sees ``path`` already (the system, the interpreter, our sources)."""
        return any(path == root or path.startswith(root + "/") for root in self._system_read)

    def shadows(self, path: str) -> bool:
        """Whether a mount at ``path`` would hide what every sandbox needs (the interpreter, our sources)."""
        # normpath keeps a leading "//" (POSIX leaves it to the system); here it is the root as well.
        plain = "/" + posixpath.normpath(path).lstrip("/")
        return any(root == plain or root.startswith(plain.rstrip("/") + "/") for root in self._system_read)

    def own(self, path: Path) -> None:
        """Make ``path`` (a workspace, a zygote's directory) the sandbox user's, recursively."""
        if not (self.sandboxed and self.root):
            return
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
        for parent, directories, files in os.walk(path):
            for name in (*directories, *files):
                with contextlib.suppress(FileNotFoundError):
                    os.chown(os.path.join(parent, name), SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)

    def spec(self, limits: Limits, view: View | None, *, uid: int = SANDBOX_UID) -> str:
        """The launcher's JSON argument for a child under ``view`` (process level: the limits alone).

        ``uid``: whom the child becomes when the runner is root (the browser takes one of its own, so
        its many threads stay out of the tool workers' RLIMIT_NPROC, which counts per uid).
        """
        if not self.sandboxed or view is None:
            return limits.to_json()
        read = [*self._system_read, *map(str, view.read), "/proc", "/etc"]
        write = [*map(str, view.write), *(inside for _, inside in view.binds), "/tmp", "/dev"]
        return sandbox.spec_json(
            limits,
            uid=uid if self.root else None,
            read=read,
            write=write,
            landlock=self.landlock_abi,
            relay=(view.relay[0], str(view.relay[1])) if view.relay is not None else None,
        )

    def launch(self, argv: Sequence[str], limits: Limits, view: View) -> Launch:
        """``argv`` (already resolved, the launcher or a worker module) wrapped in the sandbox.

        At the process level the command line is returned as it is.
        """
        if not self.sandboxed:
            return Launch(tuple(argv))
        assert self.bwrap is not None
        command: list[str] = [self.bwrap]
        if not self.root:
            command += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        command += [
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
        ]
        if not limits.network:
            command.append("--unshare-net")
        command += ["--cap-drop", "ALL"]
        if self.root:
            # Only to become SANDBOX_UID: the launcher drops them (and root) before any pack code runs.
            command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        # The private /tmp, /proc and /dev first: a bound path beneath /tmp or /dev/shm stays visible.
        command += ["--perms", "1777", "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
        command += _system_mounts()
        read = [path for path in self._system_read if not _is_system(path)] + [str(p) for p in view.read]
        write = [str(path) for path in view.write]
        # Directories bubblewrap makes for a mount point are root's, mode 0700: the sandbox user could
        # not reach what is bound beneath them.
        for parent in _ancestors([*read, *write, *(inside for _, inside in view.binds)]):
            command += ["--perms", "0755", "--dir", parent]
        for path in read:
            command += ["--ro-bind", path, path]
        for path in write:
            command += ["--bind", path, path]
        for source, inside in view.binds:
            command += ["--bind", str(source), inside]
        command += ["--chdir", str(view.cwd)]
        if self.seccomp_file is not None:
            command += ["--seccomp", SECCOMP_FD]
        command += ["--", *argv]
        if view.cgroup is not None:
            # Joined before bubblewrap forks: every process of the sandbox is born in the trial's cgroup.
            joins = " ".join(f'echo $$ > "{procs}" &&' for procs in view.cgroup.procs_files)
            command = ["/bin/sh", "-c", f'{joins} exec "$@"', "sh", *command]
        return Launch(tuple(command), self.seccomp_file, sandboxed=True)


_PROBED: dict[tuple[str, int], str] = {}


def _probe_bwrap(bwrap: str) -> str:
    """:func:`_probe` once per process and uid (several runners in one process ask once)."""
    key = (bwrap, os.geteuid())
    if key not in _PROBED:
        _PROBED[key] = _probe(bwrap)
    return _PROBED[key]


def _probe(bwrap: str) -> str:
    """Whether bubblewrap can make its namespaces here (user namespaces may be off for non-root)."""
    argv = [bwrap]
    if os.geteuid() != 0:
        argv += ["--unshare-user"]
    argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    argv += [*_system_mounts(), "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable ({bwrap}: {error})"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip()[:300]
        return f"unavailable ({bwrap} could not make its namespaces: {why})"
    version = subprocess.run([bwrap, "--version"], capture_output=True, check=False).stdout.decode().strip()
    return f"ok ({version or bwrap})"


def _system_mounts() -> list[str]:
    """The system directories, read-only; the merged-/usr links as links."""
    mounts: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            mounts += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            mounts += ["--ro-bind", path, path]
    # Made first and searchable: a directory bubblewrap makes for a mount point is root's, mode 0700, and
    # the sandbox user could not reach /etc/alternatives (awk, editors) or ld.so.cache behind it.
    mounts += ["--perms", "0755", "--dir", "/etc"]
    for name in _ETC:
        path = f"/etc/{name}"
        if os.path.lexists(path):
            mounts += ["--ro-bind", path, path]
    return mounts


def _ancestors(paths: list[str]) -> list[str]:
    """Every directory above ``paths`` (outer first), but the root and the system's."""
    found: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent not in ("/", "") and not _is_system(parent) and parent not in ("/tmp", "/dev", "/proc"):
            found.add(parent)
            parent = os.path.dirname(parent)
    return sorted(found, key=lambda p: (p.count("/"), p))


def _is_system(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in _SYSTEM)


def _system_paths() -> list[str]:
    """What sandboxed python needs to read: the system, the interpreter, the venv and installed sources.

    Packages installed in development mode (ours, in this checkout) live outside site-packages, named
    by ``.pth`` files there: each directory they name is bound too. Nothing else of the checkout is.
    """
    paths = [path for path in _SYSTEM if os.path.isdir(path) and not os.path.islink(path)]
    executable = os.path.realpath(sys.executable)
    prefixes = {
        os.path.realpath(sys.base_prefix),
        os.path.realpath(sys.prefix),
        sys.base_prefix,
        sys.prefix,
        os.path.dirname(os.path.dirname(executable)),
    }
    paths.extend(prefix for prefix in prefixes if not _is_system(prefix))
    sites = {os.path.realpath(entry) for entry in sys.path if entry.endswith("site-packages")}
    for site in sorted(sites):
        paths.append(site)
        with contextlib.suppress(OSError):
            for name in os.listdir(site):
                if name.endswith(".pth"):
                    paths.extend(_pth_directories(os.path.join(site, name)))
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == outer or path.startswith(outer + "/") for outer in kept):
            kept.append(path)
    return sorted(kept)


def _pth_directories(pth: str) -> list[str]:
    """The directories a ``.pth`` file adds to ``sys.path`` (its ``import`` lines are not paths)."""
    found: list[str] = []
    with contextlib.suppress(OSError, UnicodeDecodeError), open(pth, encoding="utf-8") as lines:
        for line in lines:
            entry = line.strip()
            is_path = entry and not entry.startswith(("#", "import ", "import\t")) and os.path.isabs(entry)
            if is_path and os.path.isdir(entry):
                found.append(os.path.realpath(entry))
    return found
