"""The same escapes, with the runner running as an unprivileged user (as a user without root would run it).

As root, this test runs the escapes against a runner (``FILES``: a tool's, a tool server's, the fs
provider's and the file checks') again in one child pytest whose every process has an unprivileged
uid: the sandbox then rests on a user namespace instead of root's namespaces, and the trial cgroups on
a subtree root delegated to that user (``chown``, as systemd delegates one to a user's session). Run
directly as a non-root user, those files are that run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path

import pytest

from tolokaforge.runner.process.cgroups import detect

UID = 4242
HERE = Path(__file__).parent
FILES = ("test_escapes.py", "test_server_escapes.py", "test_file_escapes.py")
"""Every file here whose escapes run against a runner this process starts (the others test the control
plane and providers started by hand, or the runner's layers, which the user's run does not change)."""


@contextlib.contextmanager
def delegated_cgroup() -> Generator[list[str]]:
    """A cgroup subtree of the current one, owned by UID: the cgroup.procs files to join."""
    tree, what = detect()
    assert tree is not None, f"root could not create a cgroup here: {what}"
    try:
        procs: list[str] = []
        for base in tree.bases:
            for parent, directories, files in os.walk(base):
                for name in [*directories, *files, "."]:
                    os.chown(os.path.join(parent, name), UID, UID)
            procs.append(str(base / "cgroup.procs"))
        yield procs
    finally:
        tree.close()


def test_every_escape_is_contained_when_the_runner_is_unprivileged() -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "run as root, this test runs the escapes as an unprivileged user; as a user, run "
            + ", ".join(FILES)
        )
    # The interpreter uv installed may live under /root (0700): the unprivileged user must reach it.
    for directory in {Path(sys.base_prefix), Path(sys.prefix), HERE}:
        for parent in [directory, *directory.parents]:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(parent, mode | stat.S_IXOTH)
    # Outside pytest's own temporary root, which is root's alone (0700).
    base = Path(tempfile.mkdtemp(prefix="tolokaforge-unprivileged-"))
    os.chmod(base, 0o755)
    os.chown(base, UID, UID)
    with delegated_cgroup() as procs:

        def join_and_drop() -> None:
            for path in procs:
                with open(path, "w") as out:
                    out.write(str(os.getpid()))
            os.setgroups([])
            os.setresgid(UID, UID, UID)
            os.setresuid(UID, UID, UID)

        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(base),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *(str(HERE / name) for name in FILES),
                "-n",
                "0",
                "-q",
                "-p",
                "no:cacheprovider",
                "-rA",  # a PASSED line per test, so each file is seen to have run
                f"--basetemp={base / 'pytest'}",
                f"--rootdir={HERE.parent.parent}",
            ],
            cwd=HERE.parent.parent,
            env=env,
            preexec_fn=join_and_drop,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
    ran = {
        line.split("::")[0].rsplit("/", 1)[-1]
        for line in done.stdout.splitlines()
        if line.startswith("PASSED ")
    }
    assert ran == set(FILES), (ran, done.stdout[-3000:])
