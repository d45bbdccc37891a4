"""Benchmark: what the OS sandbox costs -- one sandbox's start, and golden trials with it on and off.

    uv run python tools/bench/sandbox.py [--pack examples/packs/retail] [--rounds 3] [--starts 50]

Part 1, a sandbox's start (p50/p90 of ``--starts`` runs): ``/bin/true`` bare (the floor), inside
bubblewrap with the runner's mounts and seccomp filter (what every sandboxed child pays), and the
launcher (``python -I sandbox.py SPEC -- /bin/true``: limits, uid, Landlock) with and without the
sandbox around it.

Part 2, the golden pack end to end (``run_pack``, the embedded runner, as ``tolokaforge run``) at
concurrency 1 and 16 with ``--isolation sandbox`` and ``--isolation process``: trials/s and how long
the first trial took (it pays for the zygote's start), the median of ``--rounds`` runs each, and the
sandbox's share of the unsandboxed rate (the goal: at least 85 %).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from tolokaforge.core.collector import tune_collector
from tolokaforge.host import GoldenAgentFactory, Pack, RunSettings, UserRouter, load_pack, run_pack
from tolokaforge.runner import Confinement, Limits, View

Isolation = Literal["sandbox", "process"]
CONCURRENCIES = (1, 16)


def _percentiles(runs: list[float]) -> tuple[float, float]:
    ordered = sorted(runs)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.9)]


def _timed(action: Callable[[], object], starts: int) -> list[float]:
    runs: list[float] = []
    for _ in range(starts):
        began = time.perf_counter()
        action()
        runs.append((time.perf_counter() - began) * 1e3)
    return runs


def sandbox_starts(starts: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        confinement = Confinement.detect(work, without=["cgroup"])
        workspace = work / "workspace"
        workspace.mkdir()
        confinement.own(workspace)
        view = View(cwd=workspace, write=(workspace,))
        launcher = str(Path(sys.modules[Limits.__module__].__file__ or ""))
        bare = confinement.launch(["/bin/true"], Limits(), view)
        full = confinement.launch(
            [sys.executable, "-I", launcher, confinement.spec(Limits(), view), "--", "/bin/true"],
            Limits(),
            view,
        )

        def in_sandbox(launch: Any) -> None:
            with launch.opened() as (argv, fds):
                subprocess.run(argv, pass_fds=fds, check=True)

        print(f"sandbox layers here: {confinement.report}")
        print(f"{'start of':<48}{'p50 ms':>9}{'p90 ms':>9}")
        rows: list[tuple[str, Callable[[], object]]] = [
            ("/bin/true, bare (floor)", lambda: subprocess.run(["/bin/true"], check=True)),
            ("/bin/true in bubblewrap + seccomp", lambda: in_sandbox(bare)),
            (
                "launcher, no sandbox (--isolation process)",
                lambda: subprocess.run(
                    [sys.executable, "-I", launcher, Limits().to_json(), "--", "/bin/true"], check=True
                ),
            ),
            ("launcher in the sandbox (+ uid, Landlock)", lambda: in_sandbox(full)),
        ]
        for name, action in rows:
            p50, p90 = _percentiles(_timed(action, starts))
            print(f"{name:<48}{p50:9.2f}{p90:9.2f}")
        confinement.close()


class FirstDone:
    def __init__(self) -> None:
        self.first: float | None = None

    def started(self, total: int, skipped: int) -> None:
        return None

    def trial_done(self, outcome: Any) -> None:
        if self.first is None:
            self.first = time.perf_counter()


async def golden_rate(
    pack: Pack, isolation: Isolation, concurrency: int, output: Path, trials: int
) -> tuple[float, float, float]:
    """(trials/s, ms to the first finished trial, pass rate) of one golden run of every task."""
    observer = FirstDone()
    began = time.perf_counter()
    summary = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=output, concurrency=concurrency, isolation=isolation, trials=trials),
        observer,
    )
    elapsed = time.perf_counter() - began
    first = ((observer.first or began) - began) * 1e3
    return summary.ran / elapsed, first, summary.pass_rate


async def golden_runs(pack: Pack, rounds: int, trials: int) -> None:
    print(
        f"\npack {pack.name}: {len(pack.tasks)} tasks x {trials} trials, golden agent, embedded runner, "
        f"median of {rounds} runs after a warm-up run of each"
    )
    print(
        f"{'conc':>5}{'sandbox trials/s':>18}{'process trials/s':>18}{'share':>8}{'1st ms sandbox':>16}{'process':>9}"
    )
    scratch = Path(tempfile.mkdtemp(prefix="tf-bench-sandbox-"))
    try:
        for isolation in ("process", "sandbox"):  # warm-up: imports, the page cache, the first zygote
            await golden_rate(pack, isolation, 16, scratch / f"warm-{isolation}", trials)
        for concurrency in CONCURRENCIES:
            measured: dict[str, list[tuple[float, float, float]]] = {"sandbox": [], "process": []}
            for index in range(rounds):
                for isolation in ("process", "sandbox"):
                    output = scratch / f"{isolation}-{concurrency}-{index}"
                    measured[isolation].append(
                        await golden_rate(pack, isolation, concurrency, output, trials)
                    )
            rate = {name: statistics.median(run[0] for run in runs) for name, runs in measured.items()}
            first = {name: statistics.median(run[1] for run in runs) for name, runs in measured.items()}
            passed = min(run[2] for runs in measured.values() for run in runs)
            share = rate["sandbox"] / rate["process"] if rate["process"] else 0.0
            print(
                f"{concurrency:>5}{rate['sandbox']:18.1f}{rate['process']:18.1f}{share:8.0%}"
                f"{first['sandbox']:16.0f}{first['process']:9.0f}   (pass rate {passed:.2f})"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("goal: the sandbox's share >= 85 %")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pack", type=Path, default=Path("examples/packs/retail"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=2, help="trials per task")
    parser.add_argument("--starts", type=int, default=50)
    args = parser.parse_args()
    sandbox_starts(args.starts)
    pack = load_pack(args.pack)
    tune_collector()
    await golden_runs(pack, args.rounds, args.trials)


if __name__ == "__main__":
    asyncio.run(main())
