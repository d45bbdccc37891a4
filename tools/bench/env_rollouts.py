"""Benchmark: the RL environment API against the CLI's path, golden episodes of the retail pack.

    uv run python tools/bench/env_rollouts.py [--episodes 1024] [--concurrency 1024] [--isolation process]
        [--no-ray | --no-ray-batch | --ray-ab]

Runs ``--episodes`` episodes of the pack (cycling over its tasks), ``--concurrency`` in flight, each
stepped with the golden actions as the policy (answered at once), through ``tolokaforge.env``: on the
embedded runner and on a local Ray cluster (2 workers per its CPUs). Prints episodes/s, steps/s and the
reward latency after the last step (``env.reward()`` once the step that ended the episode returned,
p50 / p95). The floor, measured in the same run: ``run_pack`` with the golden agent on the embedded
runner (what ``tolokaforge run --agent golden`` does) over the same number of trials at the same
concurrency, both writing a run folder; measured in the order CLI, env, Ray, env, CLI, the better of
each path's two runs counting. Goal: the env API's episodes/s within 10 % of the floor's
trials/s.

Ray's calls are batched per worker (``Environments.open(ray_batch=True)``, the default);
``--no-ray-batch`` measures one actor call per reset, step and finish instead, and ``--ray-ab`` both,
alternated (batched, single, single, batched between the two env runs). ``CPU ms/ep`` is what this
process and every process it started (the runner's workers, the Ray cluster and its actors) spent per
episode, read from ``/proc``: on a machine shared with other work, the figure that noise moves least.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine_cpu import tree_seconds, tree_spent

from tolokaforge.env import Env, Environments, golden_call
from tolokaforge.host import GoldenAgentFactory, Pack, RunSettings, UserRouter, load_pack, run_pack


async def _episode(envs: Environments, env: Env, task_id: str, seed: int, latencies: list[float]) -> int:
    task = envs.tasks[task_id].task
    checks = task.grading.state_checks
    actions = [a for a in (checks.golden_actions if checks is not None else []) if a.executor != "user"]
    observation = await env.reset(task_id, seed)
    names = [tool["function"]["name"] for tool in observation.tools]
    steps = 0
    done = observation.done
    while not done:
        if steps < len(actions):
            message = golden_call(actions[steps], steps + 1, names)
        else:
            message = {"role": "assistant", "content": task.golden_response or "Done."}
        _, done, _ = await env.step(message)
        steps += 1
    ended = time.perf_counter()
    reward = await env.reward()
    latencies.append(time.perf_counter() - ended)
    await env.close()
    if not reward.passed:
        raise AssertionError(f"{task_id}: the golden policy did not pass: {reward.reasons}")
    return steps


async def _env_case(
    pack: Pack, args: argparse.Namespace, output: Path, ray: bool, batch: bool = True
) -> dict[str, Any]:
    latencies: list[float] = []
    async with Environments.open(
        pack, output=output, isolation=args.isolation, ray=ray, ray_batch=batch
    ) as envs:
        tasks = envs.task_ids
        free = [envs.env() for _ in range(min(args.concurrency, args.episodes))]
        gate = asyncio.Semaphore(len(free))

        async def one(number: int) -> int:
            async with gate:
                env = free.pop()
                try:
                    return await _episode(envs, env, tasks[number % len(tasks)], number, latencies)
                finally:
                    free.append(env)

        cpu = tree_seconds()
        started = time.perf_counter()
        steps = sum(await asyncio.gather(*(one(n) for n in range(args.episodes))))
        wall = time.perf_counter() - started
        spent = tree_spent(cpu, tree_seconds())
    return {
        "episodes/s": args.episodes / wall,
        "CPU ms/ep": spent / args.episodes * 1000,
        "steps/s": steps / wall,
        "p50 ms": statistics.median(latencies) * 1000,
        "p95 ms": statistics.quantiles(latencies, n=20)[-1] * 1000,
    }


async def _cli_case(pack: Pack, args: argparse.Namespace, output: Path) -> tuple[float, float]:
    """Trials/s and CPU ms per trial (the runner is started inside ``run_pack``, so both include it)."""
    trials = -(-args.episodes // len(pack.tasks))
    settings = RunSettings(
        output=output, trials=trials, concurrency=args.concurrency, isolation=args.isolation
    )
    cpu = tree_seconds()
    started = time.perf_counter()
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(stand_in=True), settings)
    wall = time.perf_counter() - started
    spent = tree_spent(cpu, tree_seconds())
    assert summary.pass_rate == 1.0, summary.pass_rate
    return trials * len(pack.tasks) / wall, spent / (trials * len(pack.tasks)) * 1000


def _progress(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pack", default="examples/packs/retail")
    parser.add_argument("--episodes", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=1024)
    parser.add_argument("--isolation", default="process", choices=["sandbox", "process", "thread"])
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument(
        "--ray-batch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Ray's calls batched per worker (default) or one actor call each",
    )
    parser.add_argument("--ray-ab", action="store_true", help="Ray batched and not, alternated")
    args = parser.parse_args()
    pack = load_pack(Path(args.pack))
    # Ray runs before the second env run and after it: (name, batched) in order.
    before: list[tuple[str, bool]] = []
    after: list[tuple[str, bool]] = []
    if args.ray_ab:
        before, after = (
            [("ray batched", True), ("ray single", False)],
            [("ray single", False), ("ray batched", True)],
        )
    elif not args.no_ray:
        before = [("ray batched" if args.ray_batch else "ray single", args.ray_batch)]
    runs: dict[str, list[dict[str, Any]]] = {}

    async def ray_cases(cases: list[tuple[str, bool]], root: Path) -> None:
        for name, batch in cases:
            row = await _env_case(pack, args, root / f"ray-{len(runs.get(name, []))}-{batch}", True, batch)
            runs.setdefault(name, []).append(row)
            _progress(f"{name}: {row['episodes/s']:.1f} episodes/s, {row['CPU ms/ep']:.1f} CPU ms/episode")

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        first = await _cli_case(pack, args, root / "cli")
        _progress(f"CLI: {first[0]:.1f} trials/s")
        embedded = await _env_case(pack, args, root / "env", ray=False)
        _progress(f"embedded: {embedded['episodes/s']:.1f} episodes/s")
        await ray_cases(before, root)
        again = await _env_case(pack, args, root / "env-again", ray=False)
        _progress(f"embedded again: {again['episodes/s']:.1f} episodes/s")
        await ray_cases(after, root)
        # CLI, env, (Ray,) env, CLI: each path's better run counts, so a noisy neighbour hits both alike.
        floor, floor_cpu = max(first, await _cli_case(pack, args, root / "cli-again"))
        _progress(f"CLI again: {floor:.1f} trials/s")
    rows = [("embedded", max(embedded, again, key=lambda row: row["episodes/s"]))]
    rows += [(name, max(rows_, key=lambda row: row["episodes/s"])) for name, rows_ in runs.items()]
    print(
        f"{args.episodes} golden episodes of {pack.name}, concurrency {args.concurrency}, isolation {args.isolation}"
    )
    print(
        f"{'path':<14}{'episodes/s':>12}{'steps/s':>10}{'reward p50 ms':>15}{'p95 ms':>9}"
        f"{'CPU ms/ep':>11}{'vs CLI':>9}"
    )
    print(f"{'CLI (floor)':<14}{floor:>12.1f}{'':>10}{'':>15}{'':>9}{floor_cpu:>11.1f}{'1.00':>9}")
    for name, row in rows:
        ratio = row["episodes/s"] / floor
        print(
            f"{name:<14}{row['episodes/s']:>12.1f}{row['steps/s']:>10.1f}{row['p50 ms']:>15.1f}"
            f"{row['p95 ms']:>9.1f}{row['CPU ms/ep']:>11.1f}{ratio:>9.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
