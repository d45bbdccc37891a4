"""Benchmark: the RL environment API against the CLI's path, golden episodes of the retail pack.

    uv run python tools/bench/env_rollouts.py [--episodes 1024] [--concurrency 1024] [--isolation process]
        [--no-ray]

Runs ``--episodes`` episodes of the pack (cycling over its tasks), ``--concurrency`` in flight, each
stepped with the golden actions as the policy (answered at once), through ``tolokaforge.env``: on the
embedded runner and on a local Ray cluster (2 workers per its CPUs). Prints episodes/s, steps/s and the
reward latency after the last step (``env.reward()`` once the step that ended the episode returned,
p50 / p95). The floor, measured in the same run: ``run_pack`` with the golden agent on the embedded
runner (what ``tolokaforge run --agent golden`` does) over the same number of trials at the same
concurrency, both writing a run folder; measured in the order CLI, env, Ray, env, CLI, the better of
each path's two runs counting. Goal: the env API's episodes/s within 10 % of the floor's
trials/s.
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


async def _env_case(pack: Pack, args: argparse.Namespace, output: Path, ray: bool) -> dict[str, Any]:
    latencies: list[float] = []
    async with Environments.open(pack, output=output, isolation=args.isolation, ray=ray) as envs:
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

        started = time.perf_counter()
        steps = sum(await asyncio.gather(*(one(n) for n in range(args.episodes))))
        wall = time.perf_counter() - started
    return {
        "episodes/s": args.episodes / wall,
        "steps/s": steps / wall,
        "p50 ms": statistics.median(latencies) * 1000,
        "p95 ms": statistics.quantiles(latencies, n=20)[-1] * 1000,
    }


async def _cli_case(pack: Pack, args: argparse.Namespace, output: Path) -> float:
    trials = -(-args.episodes // len(pack.tasks))
    settings = RunSettings(
        output=output, trials=trials, concurrency=args.concurrency, isolation=args.isolation
    )
    started = time.perf_counter()
    summary = await run_pack(pack, GoldenAgentFactory(), UserRouter(stand_in=True), settings)
    wall = time.perf_counter() - started
    assert summary.pass_rate == 1.0, summary.pass_rate
    return trials * len(pack.tasks) / wall


def _progress(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pack", default="examples/packs/retail")
    parser.add_argument("--episodes", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=1024)
    parser.add_argument("--isolation", default="process", choices=["sandbox", "process", "thread"])
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    pack = load_pack(Path(args.pack))
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        first = await _cli_case(pack, args, root / "cli")
        _progress(f"CLI: {first:.1f} trials/s")
        embedded = await _env_case(pack, args, root / "env", ray=False)
        _progress(f"embedded: {embedded['episodes/s']:.1f} episodes/s")
        rows: list[tuple[str, dict[str, Any]]] = []
        if not args.no_ray:
            rows.append(("ray (local)", await _env_case(pack, args, root / "ray", ray=True)))
            _progress(f"ray: {rows[-1][1]['episodes/s']:.1f} episodes/s")
        again = await _env_case(pack, args, root / "env-again", ray=False)
        _progress(f"embedded again: {again['episodes/s']:.1f} episodes/s")
        rows.insert(0, ("embedded", max(embedded, again, key=lambda row: row["episodes/s"])))
        # CLI, env, (Ray,) env, CLI: each path's better run counts, so a noisy neighbour hits both alike.
        floor = max(first, await _cli_case(pack, args, root / "cli-again"))
        _progress(f"CLI again: {floor:.1f} trials/s")
    print(
        f"{args.episodes} golden episodes of {pack.name}, concurrency {args.concurrency}, isolation {args.isolation}"
    )
    print(f"{'path':<14}{'episodes/s':>12}{'steps/s':>10}{'reward p50 ms':>15}{'p95 ms':>9}{'vs CLI':>9}")
    print(f"{'CLI (floor)':<14}{floor:>12.1f}{'':>10}{'':>15}{'':>9}{'1.00':>9}")
    for name, row in rows:
        ratio = row["episodes/s"] / floor
        print(
            f"{name:<14}{row['episodes/s']:>12.1f}{row['steps/s']:>10.1f}{row['p50 ms']:>15.1f}"
            f"{row['p95 ms']:>9.1f}{ratio:>9.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
