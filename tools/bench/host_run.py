"""Benchmark: golden-agent trials per second on the retail pack, embedded and against a runner process.

    uv run python tools/bench/host_run.py [--pack examples/packs/retail] [--trials 1] [--golden-replay task|trial]
        [--isolation process|thread]

For concurrency 1 and 16, on the embedded runner (in this process, called in process: what
``tolokaforge run`` does without ``--runner``) and on ``tolokaforge-runner`` in another process (over
gRPC), it runs every task of the pack with the golden agent and prints trials/s. Beside each figure it
prints the floor measured in the same run against the same runner: the rate of bare RegisterTrial +
CleanupTrial round trips of the pack's own trial specs at the same concurrency, the least any trial
costs before a single tool call or grade. ``--golden-replay trial`` makes both runners replay the golden
path for every trial (the default reuses a task's once two replays agree: docs/grading.md).
``--isolation`` is the runner's: python tools in forked worker processes (the default) or on threads.

Beside the whole run's rate: ``steady``, the rate between the first and the last tenth of the trials to
finish (the run's fixed costs left out: each task's first registration and golden replays, the zygote's
start, the drain at the end), and ``1st ms``, how long the first trial took to finish.

After each run it prints the CPU a trial cost, in milliseconds: in this process (host, and the embedded
runner), and in the processes it started and reaped (tool workers and their zygotes, the result-file
helper; with a runner process, that runner and everything under it, reaped at its end: so the
runner-process rows show 0 until the runner exits, and the total is printed once it has). ``machine``
is the whole machine's busy CPU over the run per trial (every process and the kernel, from /proc/stat)
and ``busy`` the share of its cores that was: the rate can reach at most cores / machine CPU per trial.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import tempfile
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from machine_cpu import machine_seconds
from runner_process import runner_process

from tolokaforge.core.collector import tune_collector
from tolokaforge.host import (
    GoldenAgentFactory,
    Pack,
    Runner,
    RunSettings,
    UserRouter,
    build_trial_spec,
    load_pack,
    open_runner,
    run_pack,
)

CONCURRENCIES = (1, 16)


Isolation = Literal["process", "thread"]


Opened = tuple[str | None, Path | None]
"""A runner's address and its token file (None, None: the embedded runner)."""


@asynccontextmanager
async def embedded(golden_replay: str, isolation: Isolation) -> AsyncGenerator[Opened]:
    """run_pack starts its own embedded runner; the floor gets one of its own, the same way."""
    yield None, None


@asynccontextmanager
async def subprocess_runner(golden_replay: str, isolation: Isolation) -> AsyncGenerator[Opened]:
    async with runner_process("--golden-replay", golden_replay, "--isolation", isolation) as runner:
        yield runner.address, runner.token_file


def cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped descendants): user + system CPU seconds so far."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime


async def floor_rate(
    address: str | None,
    pack: Pack,
    concurrency: int,
    rounds: int,
    isolation: Isolation,
    *,
    token_file: Path | None = None,
) -> float:
    """RegisterTrial + CleanupTrial round trips per second over the pack's specs."""
    async with open_runner(address, isolation=isolation, token_file=token_file) as client:
        return await _floor_rate(client, pack, concurrency, rounds)


async def _floor_rate(client: Runner, pack: Pack, concurrency: int, rounds: int) -> float:
    specs = [
        build_trial_spec(loaded.task, run_id="floor", trial_index=index)
        for index in range(rounds)
        for loaded in pack.tasks
    ]
    gate = asyncio.Semaphore(concurrency)

    async def one(spec_index: int) -> None:
        async with gate:
            spec = specs[spec_index]
            await client.register(spec)
            await client.release(spec.trial_id)

    await asyncio.gather(*(one(i) for i in range(len(pack.tasks))))  # warm-up: each task sent once
    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(len(specs))))
    elapsed = time.perf_counter() - started
    return len(specs) / elapsed


class Completions:
    """When each trial of a run finished (a RunObserver for ``run_pack``)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def started(self, total: int, skipped: int) -> None:
        return None

    def trial_done(self, outcome: Any) -> None:
        self.times.append(time.perf_counter())

    def steady_rate(self) -> float:
        """Trials/s between the first and the last tenth of the run's trials to finish: the rate once
        every task's first trials (parsing the task, its first golden replays, starting the zygote)
        are behind and before the last trials drain."""
        times = sorted(self.times)
        low, high = len(times) // 10, len(times) * 9 // 10
        if high - low < 2:
            return 0.0
        return (high - low) / (times[high] - times[low])


async def trial_rate(
    address: str | None,
    pack: Pack,
    concurrency: int,
    trials: int,
    golden_replay: Literal["task", "trial"],
    isolation: Isolation = "process",
    *,
    output: Path,
    token_file: Path | None = None,
) -> tuple[float, float, int, float, float]:
    """(trials/s, pass rate, trials run, steady trials/s, ms to the first trial done); the run's files
    go to ``output`` (a new directory); ``token_file``: the runner at ``address``'s."""
    completions = Completions()
    started = time.perf_counter()
    summary = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(
            output=output,
            trials=trials,
            concurrency=concurrency,
            runner=address,
            runner_token_file=token_file,
            golden_replay=golden_replay,
            isolation=isolation,
        ),
        completions,
    )
    elapsed = time.perf_counter() - started
    first = (min(completions.times) - started) * 1e3 if completions.times else 0.0
    return summary.ran / elapsed, summary.pass_rate, summary.ran, completions.steady_rate(), first


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pack", type=Path, default=Path("examples/packs/retail"))
    parser.add_argument("--trials", type=int, default=1, help="trials per task")
    parser.add_argument("--golden-replay", choices=("task", "trial"), default="task")
    parser.add_argument("--isolation", choices=("process", "thread"), default="process")
    args = parser.parse_args()
    pack = load_pack(args.pack)
    tune_collector()  # as `tolokaforge run` does once the pack is loaded
    print(
        f"pack {pack.name}: {len(pack.tasks)} tasks x {args.trials} trial(s), golden agent, "
        f"golden replay per {args.golden_replay}, {args.isolation} isolation"
    )
    print(
        f"{'runner':<11}{'conc':>5}{'trials/s':>11}{'steady':>8}{'1st ms':>8}{'floor reg+cleanup/s':>22}"
        f"{'ratio':>8}{'pass':>7}"
        f"{'CPU ms/trial: here':>20}{'started':>9}{'machine':>9}{'busy':>6}"
    )
    openers: tuple[tuple[str, Any], ...] = (("embedded", embedded), ("process", subprocess_runner))
    # Every run's files stay until the end: a new inode on ext4 costs ten times more for a minute or
    # so after many were deleted near it, so removing each run's files would slow the next run's writes.
    scratch = Path(tempfile.mkdtemp(prefix="tf-bench-"))
    try:
        for mode, opener in openers:
            await _mode(mode, opener, pack, args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _mode(mode: str, opener: Any, pack: Pack, args: argparse.Namespace, scratch: Path) -> None:
    """One runner mode (embedded, or a runner process) at each concurrency; each run's files under ``scratch``."""
    ran_here = 0
    before_mode = cpu_seconds()
    async with opener(args.golden_replay, args.isolation) as (address, token_file):
        # warm-up: imports, code bundle, caches
        await floor_rate(address, pack, 4, 1, args.isolation, token_file=token_file)
        for concurrency in CONCURRENCIES:
            floor = await floor_rate(
                address, pack, concurrency, args.trials, args.isolation, token_file=token_file
            )
            before, machine_before = cpu_seconds(), machine_seconds()
            rate, passed, ran, steady, first = await trial_rate(
                address,
                pack,
                concurrency,
                args.trials,
                args.golden_replay,
                args.isolation,
                output=Path(tempfile.mkdtemp(prefix="run-", dir=scratch)),
                token_file=token_file,
            )
            after, machine_after = cpu_seconds(), machine_seconds()
            ran_here += ran
            here, started = ((a - b) / ran * 1e3 for a, b in zip(after, before, strict=True))
            busy, elapsed = (a - b for a, b in zip(machine_after, machine_before, strict=True))
            print(
                f"{mode:<11}{concurrency:>5}{rate:>11.2f}{steady:>8.1f}{first:>8.0f}{floor:>22.2f}"
                f"{rate / floor:>8.2f}{passed:>7.2f}"
                f"{here:>20.2f}{started:>9.2f}{busy / ran * 1e3:>9.2f}{busy / elapsed:>6.0%}"
            )
    if mode == "process":
        # The runner and its workers were reaped just now: their CPU over this mode's trials (and
        # its floors, which start no worker), all trials alike.
        reaped = (cpu_seconds()[1] - before_mode[1]) / ran_here * 1e3
        print(f"{'':<11}{'':>5}{'the runner process and its workers over these trials:':>66}{reaped:>9.2f}")


if __name__ == "__main__":
    asyncio.run(main())
