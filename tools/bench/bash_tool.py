"""Benchmark: one ``bash`` tool call through the runner, beside the same command run bare in the same shell.

    uv run python tools/bench/bash_tool.py [--calls 300] [--isolation sandbox|process]

A runner (embedded, called in process as ``tolokaforge run`` does; ``--isolation sandbox`` by default)
registers one trial whose exec provider serves ``bash``; after a few warm-up calls (the shell is
started and stays), each command is sent ``--calls`` times as an ExecuteTool of ``bash`` and timed
end to end (p50, p90). The floor is the same command run bare in that same warm shell, in the same
sandbox, timed by the shell itself (``$EPOCHREALTIME`` around a loop of the command): what the command
costs with no tool call around it. A last row gives, for scale, the same provider's ``calculator``
through the same path: the provider round trip with no shell in it. Beside the wall times, the CPU of
the whole process tree per call (runner, sandbox, provider, shell, command) and per bare run: on a
loaded machine the wall times mostly wait for a core, the CPU figures do not. Goal: the call's p50 at most 2 ms over the bare command.
"""

from __future__ import annotations

import argparse
import asyncio
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
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerSettings, start_runner

TRIAL = "bench:0"
COMMANDS = ("true", "echo x", "cat file.txt")
GOAL_MS = 2.0
_BARE_LOOPS = 500


async def main(calls: int, isolation: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        runner = await start_runner(
            RunnerSettings(work_dir=Path(scratch), isolation=isolation),  # pyright: ignore[reportArgumentType]
            serve=False,
        )
        try:
            stub = runner.servicer
            server = {
                "name": "exec",
                "protocol": "provider",
                "command": [sys.executable, "-m", "tolokaforge_provider_exec.server"],
                "enabled": ["bash", "calculator"],
            }
            spec = {
                "trial_id": TRIAL,
                "task": {"task_id": "bench", "agent_tools": [], "user_tools": [], "tool_servers": [server]},
            }
            registered = await stub.register_trial(
                RegisterTrialRequest(
                    trial_id=TRIAL,
                    trial_spec_json=json.dumps(spec),
                    engine_protocol_version=ENGINE_PROTOCOL_VERSION,
                )
            )
            assert registered.success, registered.error
            counter = 0

            async def call(tool: str, arguments: dict[str, str]) -> str:
                nonlocal counter
                counter += 1
                reply = await stub.execute_tool(
                    ExecuteToolRequest(
                        trial_id=TRIAL,
                        tool_name=tool,
                        arguments_json=json.dumps(arguments),
                        executor="agent",
                        call_id=f"c{counter}",
                    )
                )
                assert reply.status == ExecutionStatus.SUCCESS, reply
                return reply.output

            async def bash(command: str) -> str:
                return await call("bash", {"command": command})

            await bash("printf 'one line\\n' > file.txt")
            for _ in range(20):
                await bash("true")
            print(
                f"bash tool, {isolation} isolation, {calls} calls per command; machine load "
                f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times wait for a core when it is high)"
            )
            print(
                f"{'command':<14} {'call p50':>9} {'p90':>8} {'bare':>8} {'over':>8}   "
                f"{'call CPU':>9} {'bare CPU':>9} {'over':>8}   goal: over <= {GOAL_MS} ms"
            )
            for command in COMMANDS:
                timings: list[float] = []
                cpu_before = _tree_cpu_s()
                for _ in range(calls):
                    started = time.perf_counter()
                    await bash(command)
                    timings.append((time.perf_counter() - started) * 1000)
                call_cpu = (_tree_cpu_s() - cpu_before) * 1000 / calls
                bare, bare_cpu = await _bare_ms(bash, command)
                p50 = statistics.median(timings)
                p90 = statistics.quantiles(timings, n=10)[-1]
                mark = "ok" if p50 - bare <= GOAL_MS else "OVER"
                cpu_mark = "ok" if call_cpu - bare_cpu <= GOAL_MS else "OVER"
                print(
                    f"{command:<14} {p50:>9.3f} {p90:>8.3f} {bare:>8.3f} {p50 - bare:>8.3f} {mark:<4}"
                    f"{call_cpu:>9.3f} {bare_cpu:>9.3f} {call_cpu - bare_cpu:>8.3f} {cpu_mark}"
                )
            # For scale: the same provider's calculator, a call that starts no process (the round trip alone).
            timings = []
            cpu_before = _tree_cpu_s()
            for _ in range(calls):
                started = time.perf_counter()
                await call("calculator", {"expression": "1 + 1"})
                timings.append((time.perf_counter() - started) * 1000)
            call_cpu = (_tree_cpu_s() - cpu_before) * 1000 / calls
            p90 = statistics.quantiles(timings, n=10)[-1]
            print(
                f"{'(calculator)':<14} {statistics.median(timings):>9.3f} {p90:>8.3f} {'':>8} {'':>8} {'':<4}"
                f"{call_cpu:>9.3f}   the provider round trip alone"
            )
            await stub.cleanup_trial(CleanupTrialRequest(trial_id=TRIAL))
        finally:
            await runner.close()


async def _bare_ms(bash: Callable[[str], Awaitable[str]], command: str) -> tuple[float, float]:
    """The command's own cost in the warm shell, per run: wall (timed by bash around a loop) and the
    CPU of the process tree over that loop; the median round of three."""
    loop = (
        f"s=$EPOCHREALTIME; for ((i=0; i<{_BARE_LOOPS}; i++)); do {command} >/dev/null; done; "
        "e=$EPOCHREALTIME; echo $s $e"
    )
    rounds: list[tuple[float, float]] = []
    for _ in range(3):
        cpu_before = _tree_cpu_s()
        text = await bash(loop)
        # One tool call's own CPU is in the figure too, spread over the loop's runs.
        cpu = (_tree_cpu_s() - cpu_before) * 1000 / _BARE_LOOPS
        start, end = (float(part) for part in text.split())
        rounds.append(((end - start) * 1000 / _BARE_LOOPS, cpu))
    return sorted(rounds)[1]


def _tree_cpu_s() -> float:
    """CPU seconds of this process and every live descendant (with what each has reaped): the runner,
    the sandbox, the provider, its shell and the commands the shell ran."""
    total = 0.0
    me = psutil.Process()
    for process in (me, *me.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--isolation", choices=("sandbox", "process"), default="sandbox")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.calls, arguments.isolation))
