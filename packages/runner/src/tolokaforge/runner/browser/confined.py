"""Chromium's command: the binary found, and wrapped in bubblewrap with no network at all.

Playwright launches whatever ``executable_path`` names and speaks to it over the pipe on fds 3 and 4,
so confinement is a small generated shell script that execs bubblewrap around the browser: the
sandbox's walls are process/confinement.py's (new user, pid, ipc, uts namespaces; ``--unshare-net``;
read-only system; a private ``/tmp`` and ``/dev``; seccomp and Landlock where they hold; death with the
runner), and the launcher (process/sandbox.py) takes its last steps inside. The browser needs no
network: every request a page makes is answered by interception.

A root runner's browser runs as :data:`BROWSER_UID`, not as the tool workers' ``nobody``: RLIMIT_NPROC
counts every process and thread of a uid, and Chromium's hundred-odd threads would otherwise eat the
budget the workers fork in (their zygote's fork then fails with EAGAIN under load).
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..process import sandbox
from ..process.cgroups import TrialCgroup
from ..process.confinement import SANDBOX_UID, SECCOMP_FD, Confinement, SandboxUnavailable, View
from ..process.sandbox import Limits

__all__ = [
    "BROWSERS",
    "BROWSER_UID",
    "BrowserUnavailableError",
    "ChromiumCommand",
    "PageCrashed",
    "confined_command",
    "find_chromium",
]

BROWSER_UID = SANDBOX_UID - 1
"""The uid a root runner's confined browser runs as (owns nothing; unnamed in /etc/passwd)."""

BROWSERS = ("chromium-headless-shell", "chromium")
"""Looked up on PATH in this order when no binary is named. Debian's ``chromium-headless-shell`` (the
old headless mode as its own binary, no UI stack) costs a trial's context about a fifth of the CPU
``chromium``'s does, with the same engine and version (docs/web-tasks.md, "What it costs")."""

_DEBIAN_BINARIES = {
    "chromium": "/usr/lib/chromium/chromium",
    "chromium-headless-shell": "/usr/lib/chromium/chromium-headless-shell",
}
"""What Debian's shell launchers in ``/usr/bin`` exec (``chromium``'s after sourcing flags we set
ourselves)."""

_SECCOMP_FD = 9
"""The descriptor the wrapper opens the seccomp program on for bubblewrap."""

# A browser is many processes and threads, maps far more address space than it uses (V8's cages), and
# lives as long as the runner: the per-child defaults of a tool worker would kill it.
_LIMITS = Limits(
    address_space_bytes=resource.RLIM_INFINITY,
    cpu_seconds=resource.RLIM_INFINITY,
    open_files=8192,
    processes=8192,
)

_READ = ("/etc/fonts", "/usr/share/fonts")


class BrowserUnavailableError(Exception):
    """No browser here, or it could not start; the message says what and how to fix it."""


class PageCrashed(BrowserUnavailableError):
    """The trial's page died (its renderer ran out of memory or was killed) while the browser lives:
    the page's own doing, which costs its call, not the trial."""


@dataclass(frozen=True)
class ChromiumCommand:
    executable: str
    """What Playwright launches: the browser, or the wrapper that confines it."""
    binary: str
    """The browser's own binary."""
    confinement: str
    """``bwrap, no network`` (with the further layers that hold), or ``none``."""


def find_chromium(executable: str | None = None) -> str:
    """The browser binary: ``executable``, else ``$TOLOKAFORGE_CHROMIUM``, else the first of
    :data:`BROWSERS` on PATH."""
    named = executable or os.environ.get("TOLOKAFORGE_CHROMIUM")
    found = next((path for name in ((named,) if named else BROWSERS) if (path := shutil.which(name))), None)
    if found is None:
        where = repr(named) if named else f"{' or '.join(BROWSERS)} on PATH"
        raise BrowserUnavailableError(
            f"no Chromium at {where}: install Debian's chromium-headless-shell "
            "(apt install chromium-headless-shell) or chromium, or name the binary in TOLOKAFORGE_CHROMIUM"
        )
    with open(found, "rb") as head:
        is_script = head.read(2) == b"#!"
    # Debian's launchers are shell scripts (chromium's runs findmnt and sources /etc/chromium.d on every
    # start); Playwright passes the flags that matter, so the binary the script would exec is run directly.
    debian = _DEBIAN_BINARIES.get(os.path.basename(os.path.realpath(found)), "")
    if is_script and os.access(debian, os.X_OK):
        return debian
    return os.path.realpath(found)


def confined_command(
    binary: str, private_dir: Path, confinement: Confinement | None = None, *, memory_bytes: int
) -> tuple[ChromiumCommand, TrialCgroup | None]:
    """A wrapper script in ``private_dir`` that runs ``binary`` inside bubblewrap, without network.

    ``confinement``: the runner's own (its layers, as the user accepted them; its cgroup tree), else
    detected here with every layer but the cgroup required -- a missing layer is refused, never skipped.
    Where the confinement has a cgroup tree, the browser's whole process tree gets a cgroup of its own
    holding ``memory_bytes`` (returned, for the pool to empty and remove): a page that allocates without
    end costs its renderer, not the machine.
    """
    if confinement is None:
        try:
            confinement = Confinement.detect(private_dir, without=("cgroup",))
        except SandboxUnavailable as error:
            raise BrowserUnavailableError(
                f"the browser runs in the sandbox, which is incomplete here: {error}"
            ) from None
    group = (
        confinement.cgroups.create("browser", memory_bytes=memory_bytes, pids=_LIMITS.processes)
        if confinement.cgroups is not None
        else None
    )
    view = View(cwd=Path("/tmp"), read=tuple(Path(p) for p in _READ if os.path.isdir(p)), cgroup=group)
    spec = confinement.spec(_LIMITS, view, uid=BROWSER_UID)
    inner = [sys.executable, "-I", sandbox.__file__, spec, "--", binary]
    launch = confinement.launch(inner, _LIMITS, view)
    argv = [str(_SECCOMP_FD) if part == SECCOMP_FD else part for part in launch.argv]
    redirect = f" {_SECCOMP_FD}<{shlex.quote(str(launch.seccomp_file))}" if launch.seccomp_file else ""
    wrapper = private_dir / "chromium"
    wrapper.write_text(
        "#!/bin/sh\n# generated by tolokaforge.runner.browser.confined: Chromium inside bubblewrap\n"
        f'exec {shlex.join(argv)} "$@"{redirect}\n'
    )
    wrapper.chmod(0o700)
    layers = ["bwrap, no network"]
    if launch.seccomp_file is not None:
        layers.append("seccomp")
    if confinement.landlock_abi:
        layers.append(f"landlock abi {confinement.landlock_abi}")
    layers.append(f"uid {BROWSER_UID}" if confinement.root else f"uid {os.geteuid()} (a user namespace)")
    if group is not None:
        layers.append(f"cgroup, memory {memory_bytes >> 20} MiB")
    return ChromiumCommand(str(wrapper), binary, "; ".join(layers)), group


def direct_command(binary: str) -> ChromiumCommand:
    """The browser run as the runner's child, unconfined (where bubblewrap is not allowed or absent)."""
    return ChromiumCommand(binary, binary, "none")
