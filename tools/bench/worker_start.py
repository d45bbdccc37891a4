"""Benchmark: what starting a tool worker costs -- forked from a zygote or spawned afresh.

    uv run python tools/bench/worker_start.py [--trials 200] [--rounds 3] [--pack examples/packs/retail]

Three runners, each in this process, each fresh per round, rounds alternating so all see the same
machine load:

- ``fork``: isolated mode, workers forked from a zygote per code (the default);
- ``spawn``: isolated mode, every worker a fresh interpreter that imports the tools (``fork_server=False``);
- ``thread``: trusted mode, no worker at all -- the floor: what RegisterTrial + CleanupTrial cost
  without one.

Part 1, worker start: sequential RegisterTrial + one call of a trivial python tool + CleanupTrial
(each trial starts one worker -- at its first call: the runner starts workers of code it has loaded
before lazily -- and kills it). Per trial: p50 latency and CPU -- this process (the
runner and its client) plus every descendant (zygote and workers, reaped ones included). A worker's
start is the difference to the thread floor; the spawn/fork ratio is printed beside it.

Part 2, the pack: RegisterTrial + CleanupTrial of each of the pack's tasks (their real tool code and
initial state), at concurrency 1 and 16: trials/s and CPU per trial, same three runners. Code the
runner has loaded starts no worker at registration, so this is registration alone.

The machine's 1-minute load average is printed beside each row.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.host import GrpcRunner, build_trial_spec, load_pack
from tolokaforge.runner import RunnerSettings, start_runner

sys.path.insert(0, str(Path(__file__).parent))
from runner_calls import TOOLS, _spec  # pyright: ignore[reportPrivateUsage]

MODES = ("fork", "spawn", "thread")
WARM_UP = 10


def _settings(mode: str) -> RunnerSettings:
    if mode == "thread":
        return RunnerSettings(isolation="thread")
    return RunnerSettings(isolation="process", fork_server=mode == "fork")


def _cpu_seconds() -> float:
    """CPU of this process, its reaped children, and every live descendant with its reaped children."""
    mine = os.times()
    total = mine.user + mine.system + mine.children_user + mine.children_system
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


async def _measured(
    trials: int, concurrency: int, one: Callable[[int], Awaitable[float]]
) -> tuple[float, float, float]:
    """(trials/s, p50 latency ms, CPU ms per trial) of ``trials`` calls of ``one(index)`` at ``concurrency``."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def gated(index: int) -> None:
        async with gate:
            latencies.append(await one(index))

    cpu = _cpu_seconds()
    started = time.perf_counter()
    await asyncio.gather(*(gated(index) for index in range(trials)))
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu
    return trials / elapsed, statistics.median(latencies) * 1e3, cpu / trials * 1e3


async def _tiny(mode: str, trials: int, code: Path) -> tuple[float, float, float]:
    handle = await start_runner(_settings(mode))
    channel = handle.channel()
    stub = RunnerServiceStub(channel)

    async def one(index: int) -> float:
        started = time.perf_counter()
        trial_id = f"t:{index}"
        response = await stub.register_trial(_register(trial_id, code))
        assert response.success, response.error
        call = ExecuteToolRequest(
            trial_id=trial_id,
            tool_name="ping",
            arguments_json='{"text": "x"}',
            executor="agent",
            call_id="c0",
        )
        answer = await stub.execute_tool(call)
        assert answer.status == ExecutionStatus.SUCCESS, answer.error_message
        await stub.cleanup_trial(CleanupTrialRequest(trial_id=trial_id))
        return time.perf_counter() - started

    try:
        for index in range(WARM_UP):  # imports, the code bundle, the zygote
            await one(-1 - index)
        return await _measured(trials, 1, one)
    finally:
        channel.close()
        await handle.close()


def _register(trial_id: str, code: Path) -> RegisterTrialRequest:
    return RegisterTrialRequest(
        trial_id=trial_id,
        trial_spec_json=_spec(trial_id, code, 100),
        engine_protocol_version=ENGINE_PROTOCOL_VERSION,
    )


async def _pack(mode: str, pack_path: Path, concurrency: int, rounds: int) -> tuple[float, float, float]:
    pack = load_pack(pack_path)
    handle = await start_runner(_settings(mode))
    client = GrpcRunner.connect(handle.host, handle.port, token=handle.token)
    specs = [
        build_trial_spec(loaded.task, run_id=f"bench-{mode}", trial_index=index)
        for index in range(rounds + 1)
        for loaded in pack.tasks
    ]

    async def one(index: int) -> float:
        spec = specs[index]
        started = time.perf_counter()
        await client.register(spec)
        await client.release(spec.trial_id)
        return time.perf_counter() - started

    try:
        warm = len(pack.tasks)
        for index in range(warm):
            await one(index)
        specs = specs[warm:]
        return await _measured(len(specs), concurrency, one)
    finally:
        await client.aclose()
        await handle.close()


def _row(label: str, figures: dict[str, tuple[float, float, float]]) -> str:
    cells = "".join(
        f"{figures[m][0]:9.1f}/s {figures[m][1]:7.2f} ms {figures[m][2]:7.2f} ms  " for m in MODES
    )
    return f"{label:26}{cells}(load {os.getloadavg()[0]:.1f})"


def _ratio(spawn: float, fork: float) -> str:
    # Within a millisecond of the floor the difference is the machine's noise, not a ratio.
    return f"{spawn / fork:5.1f}x" if fork >= 1.0 else f"> {spawn:.0f}x (fork within 1 ms of the floor)"


def _median(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return (
        statistics.median(r[0] for r in rows),
        statistics.median(r[1] for r in rows),
        statistics.median(r[2] for r in rows),
    )


async def main(trials: int, rounds: int, pack: Path) -> None:
    print(f"python {sys.version.split()[0]}, {psutil.cpu_count()} cores; medians of {rounds} rounds")
    header = "".join(f"{m + ': rate, p50, CPU/trial':36}" for m in MODES)
    print(f"{'case':26}{header}")
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp)
        (code / "tools.py").write_text(TOOLS)
        per_mode: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODES}
        for _ in range(rounds):
            for mode in MODES:
                per_mode[mode].append(await _tiny(mode, trials, code))
        tiny = {m: _median(rows) for m, rows in per_mode.items()}
        print(_row("1 trivial tool, conc 1", tiny), flush=True)
        floor = tiny["thread"]
        fork_ms = (tiny["fork"][1] - floor[1], tiny["fork"][2] - floor[2])
        spawn_ms = (tiny["spawn"][1] - floor[1], tiny["spawn"][2] - floor[2])
        print(
            f"  worker start beyond the thread floor: fork {fork_ms[0]:6.2f} ms latency, {fork_ms[1]:6.2f} ms CPU; "
            f"spawn {spawn_ms[0]:6.2f} ms latency, {spawn_ms[1]:6.2f} ms CPU; "
            f"spawn/fork: latency {_ratio(spawn_ms[0], fork_ms[0])}, CPU {_ratio(spawn_ms[1], fork_ms[1])}",
            flush=True,
        )
    name = json.dumps(pack.name)
    for concurrency in (1, 16):
        per_mode = {m: [] for m in MODES}
        for _ in range(rounds):
            for mode in MODES:
                per_mode[mode].append(await _pack(mode, pack, concurrency, 1))
        figures = {m: _median(rows) for m, rows in per_mode.items()}
        print(_row(f"pack {name}, conc {concurrency}", figures), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pack", type=Path, default=Path("examples/packs/retail"))
    args = parser.parse_args()
    asyncio.run(main(args.trials, args.rounds, args.pack))
