"""Benchmark: a pack's tasks registered with their shared parts apart (code bundle, tables) or each whole.

    uv run python tools/bench/task_parts.py [--pack examples/packs/retail] [--rounds 3]

A runner process (memory store, process isolation) is started afresh for each case, and the host's
``GrpcRunner`` registers the first trial of every task of the pack, one at a time, then cleans it up:

* ``whole``: the runner answers HealthCheck without ``accepts_task_parts`` (as a runner before them
  did), so every task travels whole (its code bundle and tables inside its ``task_json``) and is
  parsed, digested and checked whole;
* ``parts``: the code bundle and the initial tables travel apart, once per runner, and each later task
  names them by digest.

Per task: wall ms, the runner process's CPU ms (its workers' included), this process's CPU ms, and the
kilobytes of JSON sent. The floor, in the same runner right after: the task's second trial, which the
runner registers by digest alone (nothing of the task travels or is parsed). Cases alternate over the
rounds; medians are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from runner_process import runner_process

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    CleanupTrialResponse,
    ExecuteToolRequest,
    ExecuteToolResponse,
    GradeTrialRequest,
    GradeTrialResponse,
    HealthCheckRequest,
    HealthCheckResponse,
    RegisterTrialRequest,
    RegisterTrialResponse,
    RunnerServiceStub,
)
from tolokaforge.core.collector import tune_collector
from tolokaforge.host import GrpcRunner, Pack, build_trial_spec, load_pack


class _Stub:
    """The runner's gRPC stub, saying (or not) that it takes task parts, and counting what is sent."""

    def __init__(self, inner: RunnerServiceStub, *, parts: bool) -> None:
        self._inner = inner
        self._parts = parts
        self.sent = 0

    async def health_check(
        self, message: HealthCheckRequest | None = None, *, timeout: float | None = None
    ) -> HealthCheckResponse:
        health = await self._inner.health_check(message or HealthCheckRequest(), timeout=timeout)
        health.accepts_task_parts = health.accepts_task_parts and self._parts
        return health

    async def register_trial(
        self, message: RegisterTrialRequest, *, timeout: float | None = None
    ) -> RegisterTrialResponse:
        self.sent += len(message.task_json) + len(message.code_json) + len(message.tables_json)
        return await self._inner.register_trial(message, timeout=timeout)

    async def execute_tool(
        self, message: ExecuteToolRequest, *, timeout: float | None = None
    ) -> ExecuteToolResponse:
        return await self._inner.execute_tool(message, timeout=timeout)

    async def grade_trial(
        self, message: GradeTrialRequest, *, timeout: float | None = None
    ) -> GradeTrialResponse:
        return await self._inner.grade_trial(message, timeout=timeout)

    async def cleanup_trial(
        self, message: CleanupTrialRequest, *, timeout: float | None = None
    ) -> CleanupTrialResponse:
        return await self._inner.cleanup_trial(message, timeout=timeout)


def _cpu_s(pid: int) -> float:
    """User + system CPU of ``pid`` and its reaped children, from /proc (clock ticks of 10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / 100


async def _case(pack: Pack, parts: bool) -> dict[str, float]:
    tasks = [loaded.task for loaded in pack.tasks]
    async with runner_process("--store", "memory", "--isolation", "process") as runner:
        process = runner.process
        host, port = runner.address.rsplit(":", 1)
        channel = runner.channel()
        stub = _Stub(RunnerServiceStub(channel), parts=parts)
        client = GrpcRunner(stub, address=f"{host}:{port}")
        try:
            await client.health_check()
            figures: dict[str, float] = {}
            for trial_index, name in ((0, "first"), (1, "floor")):
                sent, runner_cpu, own_cpu = stub.sent, _cpu_s(process.pid), time.process_time()
                started = time.perf_counter()
                for task in tasks:
                    spec = build_trial_spec(task, run_id="bench", trial_index=trial_index)
                    await client.register(spec)
                    await client.release(spec.trial_id)
                figures[f"{name} wall"] = (time.perf_counter() - started) * 1e3 / len(tasks)
                figures[f"{name} runner"] = (_cpu_s(process.pid) - runner_cpu) * 1e3 / len(tasks)
                figures[f"{name} host"] = (time.process_time() - own_cpu) * 1e3 / len(tasks)
                figures[f"{name} KB"] = (stub.sent - sent) / 1024 / len(tasks)
            return figures
        finally:
            await client.aclose()
            channel.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pack", type=Path, default=Path("examples/packs/retail"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pack = load_pack(args.pack)
    tune_collector()
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for round_index in range(args.rounds):
        for parts in (False, True) if round_index % 2 == 0 else (True, False):
            results[parts].append(await _case(pack, parts))
    print(
        f"pack {pack.name}: the first trial of each of its {len(pack.tasks)} tasks registered and cleaned up, "
        f"one at a time, on a fresh runner process; medians of {args.rounds} rounds"
    )
    print(f"{'case':<34}{'wall ms':>9}{'runner CPU ms':>15}{'host CPU ms':>13}{'KB sent':>9}   (per task)")
    for parts in (False, True):
        label = "parts (code, tables once)" if parts else "whole (each task with its parts)"
        for name, what in (("first", label), ("floor", "  floor: 2nd trial, by digest")):
            row = {
                key: statistics.median(r[f"{name} {key}"] for r in results[parts])
                for key in ("wall", "runner", "host", "KB")
            }
            print(f"{what:<34}{row['wall']:>9.2f}{row['runner']:>15.2f}{row['host']:>13.2f}{row['KB']:>9.1f}")


if __name__ == "__main__":
    asyncio.run(main())
