"""Benchmark: golden retail trials/s run here vs on Ray workers, at the same total concurrency.

    uv run python tools/bench/ray_run.py [--pack examples/packs/retail] [--trials 2] [--workers 2]
                                         [--concurrency 4]

One local Ray cluster (``--workers`` CPUs, no dashboard) is started for the whole benchmark. Printed
side by side, in one run:

* local: ``run_pack`` in this process at concurrency ``workers x concurrency`` (the floor: no Ray);
* ray, end to end: ``run_pack --ray`` with ``workers`` workers at ``concurrency`` each, including
  starting the workers and their embedded runners (each run starts its own pool);
* ray, steady: the same run timed from the moment its workers answered (``started`` on the observer)
  to its end, the figure a long run converges to;
* the overhead Ray adds per trial: steady time per trial over local time per trial, minus 1 (goal
  <= 15 % on one machine), and Ray's own floor, the round trip of an echo actor call carrying a real
  task in and a real TrialOutcome out (what every trial pays to cross the cluster).

These machines are noisy and shared: compare the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tolokaforge.host import (
    AgentRecipe,
    GoldenAgentFactory,
    LLMOptions,
    LoadedTask,
    Pack,
    RaySettings,
    RunSettings,
    UserRouter,
    load_pack,
    ray_connection,
    run_pack,
)

GOLDEN = AgentRecipe.of("golden", LLMOptions(None, None, "http://127.0.0.1:9/v1", None), None, False)


class _Clock:
    """An observer noting when the trials start (after the workers answered) and each outcome."""

    def __init__(self) -> None:
        self.started_at = 0.0
        self.outcomes: list[Any] = []

    def started(self, total: int, skipped: int) -> None:
        self.started_at = time.perf_counter()

    def trial_done(self, outcome: Any) -> None:
        self.outcomes.append(outcome)


async def _run(pack: Pack, settings: RunSettings) -> tuple[float, float, float, _Clock]:
    """(end-to-end s, steady s, pass rate, clock)."""
    clock = _Clock()
    started = time.perf_counter()
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(), settings, clock)
    ended = time.perf_counter()
    return ended - started, ended - clock.started_at, summary.pass_rate, clock


class _Echo:
    def echo(self, loaded: LoadedTask, outcome: Any) -> Any:
        return outcome


def _echo_round_trip_s(loaded: LoadedTask, outcome: Any, calls: int) -> float:
    # Connected by then: ray_connection imported Ray with the project's settings first. Untyped here, as
    # in the host (Ray's own annotations do not cover remote classes).
    ray: Any = importlib.import_module("ray")

    actor = ray.remote(_Echo).options(num_cpus=0).remote()
    ray.get(actor.echo.remote(loaded, outcome))  # warm-up: the actor's process, the classes
    times: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        ray.get(actor.echo.remote(loaded, outcome))
        times.append(time.perf_counter() - started)
    ray.kill(actor)
    return statistics.median(times)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pack", type=Path, default=Path("examples/packs/retail"))
    parser.add_argument("--trials", type=int, default=2, help="trials per task")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (the local cluster's CPUs)")
    parser.add_argument("--concurrency", type=int, default=4, help="trials in flight per worker")
    args = parser.parse_args()
    pack = load_pack(args.pack)
    total = args.workers * args.concurrency
    # The same local cluster `--ray local` starts (one worker per CPU; --workers caps what the run uses).
    with ray_connection("local"), tempfile.TemporaryDirectory(prefix="tf-bench-ray-") as scratch:
        root = Path(scratch)
        n = len(pack.tasks) * args.trials
        print(f"pack {pack.name}: {len(pack.tasks)} tasks x {args.trials} trial(s) = {n}, golden agent")
        print(f"total concurrency {total}: local {total} in flight; ray {args.workers} x {args.concurrency}")
        await _run(pack, RunSettings(output=root / "warm", concurrency=total))  # imports, caches
        local_s, _, local_pass, local_clock = await _run(
            pack, RunSettings(output=root / "local", trials=args.trials, concurrency=total)
        )
        on_ray = RunSettings(
            output=root / "ray",
            trials=args.trials,
            concurrency=args.concurrency,
            ray=RaySettings("auto", GOLDEN, max_workers=args.workers),
        )
        ray_s, steady_s, ray_pass, _ = await _run(pack, on_ray)
        outcome = local_clock.outcomes[0]
        echo_s = _echo_round_trip_s(pack.task(outcome.task_id), outcome, 50)
        in_trial_s = statistics.mean(o.wall_time_s for o in local_clock.outcomes)
    print(f"{'how':<22}{'wall s':>9}{'trials/s':>10}{'vs local':>10}{'pass':>6}")
    for name, seconds, passed in (
        ("local (floor)", local_s, local_pass),
        ("ray end to end", ray_s, ray_pass),
        ("ray steady", steady_s, ray_pass),
    ):
        print(f"{name:<22}{seconds:>9.2f}{n / seconds:>10.2f}{local_s / seconds:>10.2f}{passed:>6.2f}")
    print(f"per-trial overhead of Ray (steady vs local): {steady_s / local_s - 1:+.1%}  (goal <= +15%)")
    print(
        f"Ray's floor per trial: echo actor call with a real task and outcome {echo_s * 1000:.2f} ms "
        f"(a local trial takes {in_trial_s * 1000:.1f} ms in flight: {echo_s / in_trial_s:.1%})"
    )


if __name__ == "__main__":
    asyncio.run(main())
