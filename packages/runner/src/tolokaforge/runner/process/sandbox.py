"""Confine the current process before it runs pack code: the last steps, taken from inside.

Standard library only, because it runs first thing in a tool worker (before any pack import) and as
the launcher of every other child the runner starts::

    python -I sandbox.py '<confinement as JSON>' -- ARGV...

applies the confinement to itself and then execs ARGV, so a tool server or a custom check inherits it.
The JSON is either the limits alone (``--isolation process``: resource limits, a private network
namespace) or ``{"limits": ..., "sandbox": ...}`` for a process bubblewrap started (process/
confinement.py built the walls outside; here the process, still ours, takes the last ones: resource
limits, an unprivileged uid when bubblewrap ran as root, and Landlock). :func:`confine` returns what
actually holds on this machine, by name, so the runner can report it (HealthCheck
``available_adapters``): a limit the kernel refuses is reported, never silently dropped.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

TYPE_CHECKING = False  # typing itself is not imported: every sandboxed start would pay for it
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "LIMIT_NAMES",
    "Limits",
    "apply",
    "become_subreaper",
    "confine",
    "die_with_parent",
    "limit_cpu",
    "scrubbed_env",
    "spec_json",
]

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

LIMIT_NAMES = ("address_space", "cpu_time", "open_files", "processes", "file_size", "network")

# Names a child sees in its environment besides what the pack declares: enough to run a program
# (the runner's own interpreter directory first, so the tools installed beside it are found).
_BASE_ENV = {
    "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class Limits:
    """The confinement of one child. Every field is on by default; ``network=True`` lets it keep the network.

    Immutable. A plain class rather than a dataclass: importing ``dataclasses`` (with ``inspect`` and
    ``ast``) costs a sandboxed child 20 ms of start-up, once per probe, tool server and custom-check run.
    """

    __slots__ = (
        "address_space_bytes",
        "cpu_seconds",
        "file_size_bytes",
        "memory_bytes",
        "network",
        "open_files",
        "processes",
    )
    address_space_bytes: int
    cpu_seconds: int
    """CPU time over the process's whole life (the per-call wall-clock budget is the tight band)."""
    open_files: int
    processes: int
    """RLIMIT_NPROC counts every process of the user, and the kernel does not apply it to root."""
    file_size_bytes: int
    memory_bytes: int
    """The memory of a trial's processes together (its cgroup), where cgroups hold."""
    network: bool

    def __init__(
        self,
        *,
        address_space_bytes: int = 4 << 30,
        cpu_seconds: int = 3600,
        open_files: int = 256,
        processes: int = 512,
        file_size_bytes: int = 1 << 30,
        memory_bytes: int = 4 << 30,
        network: bool = False,
    ) -> None:
        for name, value in (
            ("address_space_bytes", address_space_bytes),
            ("cpu_seconds", cpu_seconds),
            ("open_files", open_files),
            ("processes", processes),
            ("file_size_bytes", file_size_bytes),
            ("memory_bytes", memory_bytes),
            ("network", network),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Limits are immutable: use replace({name}=...)")

    def _fields(self) -> dict[str, int | bool]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Limits) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(tuple(self._fields().items()))

    def __repr__(self) -> str:
        return "Limits(" + ", ".join(f"{name}={value!r}" for name, value in self._fields().items()) + ")"

    def replace(self, **changes: int | bool) -> Limits:
        """These limits with ``changes``."""
        return Limits(**{**self._fields(), **changes})  # pyright: ignore[reportArgumentType]

    def to_json(self) -> str:
        return json.dumps(self._fields(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Limits:
        return cls(**json.loads(text))


def spec_json(
    limits: Limits,
    *,
    uid: int | None,
    read: list[str],
    write: list[str],
    landlock: int,
    relay: tuple[int, str] | None = None,
) -> str:
    """The launcher's argument for a process bubblewrap starts (see :func:`confine`)."""
    sandbox = {"uid": uid, "read": read, "write": write, "landlock": landlock, "relay": relay}
    return json.dumps({"limits": limits._fields(), "sandbox": sandbox})  # pyright: ignore[reportPrivateUsage]


def scrubbed_env(declared: dict[str, str], *, home: str) -> dict[str, str]:
    """A child's whole environment: a minimal base, ``HOME``/``TMPDIR`` in its workspace, and what the pack declares."""
    return {**_BASE_ENV, "HOME": home, "TMPDIR": home, **declared}


def apply(limits: Limits, *, cpu: bool = True, network: bool = True) -> dict[str, str]:
    """Apply ``limits`` to this process; return, per limit name, what holds (or why it does not).

    ``network=False`` leaves the network alone (bubblewrap gave the process its own namespace).
    ``cpu=False`` leaves the CPU time for :func:`limit_cpu` in each forked worker: a zygote lives
    across many workers, and the limit is meant per worker life.
    """
    report: dict[str, str] = {}
    for name, which, value in (
        ("address_space", resource.RLIMIT_AS, limits.address_space_bytes),
        ("open_files", resource.RLIMIT_NOFILE, limits.open_files),
        ("processes", resource.RLIMIT_NPROC, limits.processes),
        ("file_size", resource.RLIMIT_FSIZE, limits.file_size_bytes),
    ):
        report[name] = _set_limit(which, value)
    report["cpu_time"] = limit_cpu(limits) if cpu else "set in each forked worker"
    if os.geteuid() == 0:
        report["processes"] = "not enforced (the kernel exempts root from RLIMIT_NPROC)"
    if network:
        report["network"] = "allowed" if limits.network else _unshare_network()
    die_with_parent()
    return report


def confine(text: str, *, cpu: bool = True) -> tuple[Limits, dict[str, str]]:
    """Apply a confinement given as the launcher's JSON argument; the limits and what holds.

    Inside a sandbox the network is bubblewrap's (its own namespace), the uid is dropped when the
    process is still root, and Landlock narrows the file system to ``read`` and ``write``.
    """
    given: dict[str, Any] = json.loads(text)
    if "limits" not in given:
        limits = Limits(**given)
        return limits, apply(limits, cpu=cpu)
    limits = Limits(**given["limits"])
    sandbox: dict[str, Any] = given["sandbox"]
    report = apply(limits, cpu=cpu, network=False)
    report["network"] = "allowed" if limits.network else "namespace (bubblewrap)"
    uid = sandbox.get("uid")
    if isinstance(uid, int) and os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        report["processes"] = _set_limit(resource.RLIMIT_NPROC, limits.processes)
    report["uid"] = str(os.geteuid())
    relay: list[Any] | None = sandbox.get("relay")
    listener = None
    if relay:
        # A loopback port leading to the runner's trial-scoped gateway, the one way out of this
        # sandbox's network namespace: bound now, before Landlock refuses TCP binds; served by a
        # process forked after it, walled in like the server.
        from tolokaforge.runner.process.relay import listen

        listener = listen(int(relay[0]))
        report["relay"] = f"127.0.0.1:{relay[0]}"
    abi = sandbox.get("landlock")
    if isinstance(abi, int) and abi > 0:
        from tolokaforge.runner.process import landlock

        report["landlock"] = landlock.restrict(
            list(sandbox["read"]),
            list(sandbox["write"]),
            network=limits.network,
            abi=abi,
            connect_ports=(int(relay[0]),) if relay else (),
        )
    else:
        report["landlock"] = "not used"
    if listener is not None and relay:
        from tolokaforge.runner.process.relay import start_relay

        start_relay(listener, str(relay[1]))
        listener.close()
    return limits, report


def die_with_parent() -> None:
    """Ask the kernel for SIGKILL when the parent (the runner, or a worker's zygote) dies, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``)."""
    parent = os.getppid()
    try:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return  # not Linux: the runner's group kill and its shutdown remain
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process (not to the namespace's init): they stay
    its descendants, found and killed with it."""
    with _suppress_os_errors():
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


class _suppress_os_errors:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, traceback: object) -> bool:
        return isinstance(value, (OSError, AttributeError))


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    # Loaded once: a zygote's forked workers then find it (and its looked-up functions) ready, which
    # saves each of them half a millisecond.
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def limit_cpu(limits: Limits) -> str:
    """Apply the CPU-time limit alone (a forked worker: its CPU clock starts at zero at the fork)."""
    return _set_limit(resource.RLIMIT_CPU, limits.cpu_seconds)


def _set_limit(which: int, value: int) -> str:
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError) as error:
        return f"unavailable ({error}; stays {soft})"
    return str(value)


def _unshare_network() -> str:
    """Move this process into a network namespace of its own: no interface but a down loopback."""
    unshare = getattr(os, "unshare", None)  # Python >= 3.12
    last = OSError(0, "no attempt")
    for flags, what in (
        (_CLONE_NEWNET, "namespace"),
        (_CLONE_NEWUSER | _CLONE_NEWNET, "user+network namespace"),
    ):
        try:
            if unshare is not None:
                unshare(flags)
            else:
                libc = _libc()
                if libc.unshare(ctypes.c_int(flags)) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, os.strerror(errno))
        except OSError as error:
            last = error
            continue
        return what
    return f"unavailable ({last.strerror}: no permission to create a network namespace)"


def _launch(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--report":
        # A probe: apply the limits to this process and print what holds.
        sys.stdout.write(json.dumps(confine(argv[1])[1]) + "\n")
        return
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: sandbox.py LIMITS_JSON -- ARGV... | sandbox.py --report LIMITS_JSON\n")
        raise SystemExit(2)
    confine(argv[0])
    try:
        os.execv(argv[2], argv[2:])
    except OSError as error:
        sys.stderr.write(f"sandbox: cannot run {argv[2]!r}: {error.strerror}\n")
        raise SystemExit(127) from None


if __name__ == "__main__":
    _launch(sys.argv[1:])
