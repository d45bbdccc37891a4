"""What one sandbox costs to start: bubblewrap + seccomp + the launcher, against a bare process.

    uv run python tools/bench/sandbox_start.py [--rounds 50]

Prints the p50/p90 wall time of starting ``/bin/true`` bare (the floor), inside bubblewrap with the
runner's mounts and seccomp, and of the full sandboxed launcher (python -I sandbox.py SPEC -- /bin/true:
limits, uid drop, Landlock), all measured in this run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tolokaforge.runner.process import sandbox
from tolokaforge.runner.process.confinement import Confinement, View
from tolokaforge.runner.process.sandbox import Limits


def _time(argv_of: object, rounds: int) -> list[float]:
    runs: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        argv_of()  # pyright: ignore[reportCallIssue]
        runs.append((time.perf_counter() - start) * 1000)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=50)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        confinement = Confinement.detect(work, without=["cgroup"])
        workspace = work / "ws"
        workspace.mkdir()
        confinement.own(workspace)
        view = View(cwd=workspace, write=(workspace,))
        bare = confinement.launch(["/bin/true"], Limits(), view)
        launcher = [
            sys.executable,
            "-I",
            sandbox.__file__,
            confinement.spec(Limits(), view),
            "--",
            "/bin/true",
        ]
        full = confinement.launch(launcher, Limits(), view)

        def run_bare() -> None:
            subprocess.run(["/bin/true"], check=True)

        def run_bwrap() -> None:
            with bare.opened() as (argv, fds):
                subprocess.run(argv, pass_fds=fds, check=True)

        def run_full() -> None:
            with full.opened() as (argv, fds):
                subprocess.run(argv, pass_fds=fds, check=True)

        def run_launcher_unsandboxed() -> None:
            subprocess.run(
                [sys.executable, "-I", sandbox.__file__, Limits().to_json(), "--", "/bin/true"], check=True
            )

        print(f"sandbox layers: {confinement.report}")
        print(f"{'start of':<46} {'p50 ms':>8} {'p90 ms':>8}")
        for name, action in (
            ("/bin/true, bare (floor)", run_bare),
            ("/bin/true in bubblewrap + seccomp", run_bwrap),
            ("launcher, no sandbox (--isolation process)", run_launcher_unsandboxed),
            ("launcher in the sandbox (+ uid, Landlock)", run_full),
        ):
            runs = sorted(_time(action, rounds))
            print(f"{name:<46} {statistics.median(runs):8.2f} {runs[int(len(runs) * 0.9)]:8.2f}")
        confinement.close()


if __name__ == "__main__":
    main()
