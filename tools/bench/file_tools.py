"""Benchmark: the built-in file tools through the runner's provider path, beside the bare operation.

    uv run python tools/bench/file_tools.py [--calls 300] [--isolation sandbox|process]

One trial on an embedded runner (called in process, as ``tolokaforge run`` does; ``--isolation
sandbox`` by default: the fs provider runs in the trial's bubblewrap sandbox) whose only tools are the
fs provider's. After a warm-up (the provider is started and has served every operation), each of
``read_file``, ``write_file``, ``list_dir`` and ``grep_workspace`` is called ``--calls`` times with
ExecuteTool, one call at a time, and its p50 is printed beside the p50 of the same operation done bare
in this process on the same workspace files (Python's open/read, open/write, os.scandir, and a regex
over the files). Beside the wall p50, CPU per call of this process and every process it started (the
runner is embedded here; the provider is its child), which a busy machine disturbs far less. A last
row gives, for scale, ``list_dir`` of an empty folder: the runner-to-provider round trip with no file
work in it. The goal: at most 2 ms over the bare operation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import psutil

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecutionStatus,
    RegisterTrialRequest,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerSettings, start_runner

GOAL_MS = 2.0
TRIAL = "file_tools:0"
FILES = 40
TEXT = "".join(f"line {n}: the quick brown fox {'jumps' if n % 7 == 0 else 'rests'}\n" for n in range(200))
CALLS: dict[str, dict[str, Any]] = {
    "read_file": {"path": "notes/n07.txt"},
    "write_file": {"path": "out/report.txt", "content": TEXT},
    "list_dir": {"path": "notes"},
    "grep_workspace": {"pattern": "line 14[0-9]: .* jumps", "path": "notes"},
}


def _spec() -> dict[str, Any]:
    server = {
        "name": "fs",
        "protocol": "provider",
        "command": ["tolokaforge-tool-provider-fs"],
        "enabled": list(CALLS),
    }
    task = {"task_id": "file_tools", "agent_tools": [], "user_tools": [], "tool_servers": [server]}
    return {"trial_id": TRIAL, "task": task}


def _bare(workspace: Path) -> dict[str, Callable[[], object]]:
    notes = workspace / "notes"
    pattern = re.compile(CALLS["grep_workspace"]["pattern"])

    def read() -> str:
        with open(notes / "n07.txt", encoding="utf-8") as file:
            return file.read()

    def write() -> None:
        with open(workspace / "out" / "report.txt", "w", encoding="utf-8") as file:
            file.write(TEXT)

    def listing() -> list[str]:
        with os.scandir(notes) as entries:
            return sorted(entry.name for entry in entries)

    def grep() -> list[str]:
        found: list[str] = []
        for name in sorted(os.listdir(notes)):
            with open(notes / name, encoding="utf-8", errors="replace") as file:
                found += [line for line in file.read().splitlines() if pattern.search(line)]
        return found

    return {"read_file": read, "write_file": write, "list_dir": listing, "grep_workspace": grep}


def _cpu_seconds() -> float:
    """CPU used so far by this process and every live process it started (the provider included)."""
    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _p50_ms(runs: list[float]) -> float:
    return statistics.median(runs) * 1e3


async def main(calls: int, isolation: Literal["sandbox", "process"]) -> None:
    # Embedded, called in process, as `tolokaforge run` calls it: the provider hop is the one measured.
    handle = await start_runner(RunnerSettings(isolation=isolation), serve=False)
    stub = handle.servicer
    try:
        registered = await stub.register_trial(
            RegisterTrialRequest(
                trial_id=TRIAL,
                trial_spec_json=json.dumps(_spec()),
                engine_protocol_version=ENGINE_PROTOCOL_VERSION,
            )
        )
        assert registered.success, registered.error
        names = {schema.name for schema in registered.tool_schemas}
        counter = 0

        async def call(tool: str, arguments: dict[str, Any]) -> None:
            nonlocal counter
            counter += 1
            name = next(n for n in names if n == tool or n.endswith("_" + tool))
            reply = await stub.execute_tool(
                ExecuteToolRequest(
                    trial_id=TRIAL,
                    tool_name=name,
                    arguments_json=json.dumps(arguments),
                    executor="agent",
                    call_id=f"c{counter}",
                )
            )
            assert reply.status == ExecutionStatus.SUCCESS, (tool, reply.error_message)

        # The workspace: FILES notes of 200 lines each, written through the tools themselves.
        for index in range(FILES):
            await call("write_file", {"path": f"notes/n{index:02d}.txt", "content": TEXT})
        for tool, arguments in CALLS.items():  # warm: every operation served once
            await call(tool, arguments)
        workspace = handle.servicer.runner.registry.get(TRIAL).files.workspace
        assert workspace is not None
        bare = _bare(Path(workspace))

        print(
            f"isolation: {isolation}; {calls} calls each, one at a time; workspace: {FILES} files x 200 lines"
        )
        print(
            "wall: p50 per call; cpu: this process and every process it started (runner, provider), per call"
        )
        print(
            f"{'operation':<16}{'tool wall':>10}{'bare wall':>10}{'over':>8}"
            f"{'tool cpu':>10}{'bare cpu':>10}{'over':>8}   ms; goal: over <= {GOAL_MS} ms"
        )
        for tool, arguments in CALLS.items():
            tool_runs: list[float] = []
            cpu = _cpu_seconds()
            for _ in range(calls):
                began = time.perf_counter()
                await call(tool, arguments)
                tool_runs.append(time.perf_counter() - began)
            tool_cpu = (_cpu_seconds() - cpu) / calls * 1e3
            bare_runs: list[float] = []
            cpu = _cpu_seconds()
            for _ in range(calls):
                began = time.perf_counter()
                bare[tool]()
                bare_runs.append(time.perf_counter() - began)
            bare_cpu = (_cpu_seconds() - cpu) / calls * 1e3
            wall_over = _p50_ms(tool_runs) - _p50_ms(bare_runs)
            print(
                f"{tool:<16}{_p50_ms(tool_runs):>10.3f}{_p50_ms(bare_runs):>10.3f}{wall_over:>8.3f}"
                f"{tool_cpu:>10.3f}{bare_cpu:>10.3f}{tool_cpu - bare_cpu:>8.3f}"
            )
        # For scale: listing an empty folder, the provider round trip with (almost) no file work in it.
        (Path(workspace) / "empty").mkdir()
        runs: list[float] = []
        cpu = _cpu_seconds()
        for _ in range(calls):
            began = time.perf_counter()
            await call("list_dir", {"path": "empty"})
            runs.append(time.perf_counter() - began)
        round_trip_cpu = (_cpu_seconds() - cpu) / calls * 1e3
        print(
            f"{'(empty list_dir)':<16}{_p50_ms(runs):>10.3f}{'':>18}{round_trip_cpu:>10.3f}"
            "   the runner -> provider round trip alone"
        )
        print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        await stub.cleanup_trial(CleanupTrialRequest(trial_id=TRIAL))
    finally:
        await handle.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--isolation", choices=["sandbox", "process"], default="sandbox")
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.isolation))
