"""Benchmark: what an embedded run costs beyond its trials (its fixed cost), and what a trial costs.

    uv run python tools/bench/run_fixed_cost.py [--pack examples/packs/retail] [--isolation process|thread]
        [--few 5] [--many 20] [--rounds 2]

``tolokaforge run`` starts a new embedded runner for every run, which parses and checks each task on
its first registration, replays each task's golden path until the memo holds, and starts its zygote
and result-file helper; a long-lived runner process has paid all that before. This runs the pack with
the golden agent at concurrency 16, ``--few`` and ``--many`` trials per task in alternating rounds, and
from the whole machine's busy CPU (/proc/stat) and the wall time of each run solves for the two parts:
per trial (the slope between the two sizes) and per run (what is left at ``--few``). The floor it is
read against: a run's trials at the per-trial figure alone, i.e. the rate a run would reach if it had
no fixed cost.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from host_run import Isolation, trial_rate
from machine_cpu import machine_seconds

from tolokaforge.core.collector import tune_collector
from tolokaforge.host import load_pack

CONCURRENCY = 16


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pack", type=Path, default=Path("examples/packs/retail"))
    parser.add_argument("--isolation", choices=("process", "thread"), default="process")
    parser.add_argument("--few", type=int, default=5, help="trials per task in the small runs")
    parser.add_argument("--many", type=int, default=20, help="trials per task in the large runs")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    isolation: Isolation = args.isolation
    pack = load_pack(args.pack)
    tune_collector()
    tasks = len(pack.tasks)
    scratch = Path(tempfile.mkdtemp(prefix="tf-bench-"))  # every run's files kept to the end (host_run.py)
    try:
        await trial_rate(
            None, pack, CONCURRENCY, 1, "task", isolation, output=Path(tempfile.mkdtemp(dir=scratch))
        )
        cpu: dict[int, list[float]] = {args.few: [], args.many: []}
        wall: dict[int, list[float]] = {args.few: [], args.many: []}
        for _ in range(args.rounds):
            for trials in (args.few, args.many):
                busy, started = machine_seconds()[0], time.perf_counter()
                await trial_rate(
                    None,
                    pack,
                    CONCURRENCY,
                    trials,
                    "task",
                    isolation,
                    output=Path(tempfile.mkdtemp(dir=scratch)),
                )
                wall[trials].append(time.perf_counter() - started)
                cpu[trials].append(machine_seconds()[0] - busy)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    extra = (args.many - args.few) * tasks

    def split(figures: dict[int, list[float]]) -> tuple[float, float]:
        few, many = statistics.mean(figures[args.few]), statistics.mean(figures[args.many])
        per_trial = (many - few) / extra
        return per_trial, few - per_trial * args.few * tasks

    cpu_trial, cpu_run = split(cpu)
    wall_trial, wall_run = split(wall)
    print(
        f"pack {pack.name}: {tasks} tasks, golden agent, concurrency {CONCURRENCY}, {isolation} isolation, "
        f"{args.few} and {args.many} trials per task x {args.rounds} rounds (means)"
    )
    print(f"{'':<26}{'machine CPU ms':>16}{'wall ms':>10}")
    print(f"{'per trial':<26}{cpu_trial * 1e3:>16.1f}{wall_trial * 1e3:>10.2f}")
    print(f"{'per run (fixed)':<26}{cpu_run * 1e3:>16.0f}{wall_run * 1e3:>10.0f}")
    for trials in (args.few, args.many):
        ran = trials * tasks
        rate = ran / statistics.mean(wall[trials])
        floor = 1 / wall_trial
        print(
            f"{f'{trials} per task ({ran} trials)':<26} {rate:6.1f} trials/s; without the fixed cost "
            f"{floor:6.1f} ({rate / floor:4.2f})"
        )


if __name__ == "__main__":
    asyncio.run(main())
