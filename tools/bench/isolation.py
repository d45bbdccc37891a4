"""Benchmark: the isolated path (python tools in worker processes) beside the trusted path (threads).

    uv run python tools/bench/isolation.py [--calls 2000] [--rounds 3]

For 1 trial (sequential calls) and 64 trials (one call loop each, concurrently), with a 100-record
and a 100k-record state (8 trials at 100k), it prints the per-call cost of ExecuteTool for a
trivial tool (``ping``) and for one that reads and writes a record (``touch``), under
``--isolation process`` and ``--isolation thread`` side by side, with their ratio. Each case runs in
a fresh interpreter holding one runner of each mode, measured in ten alternating blocks, so that
both see the same machine load; the medians over blocks and rounds are printed. Beside them, the floor: the same RPC answered by a bare
grpclib servicer (runner_calls.py's echo). Then the RSS of an idle trial: its worker's RSS (and
its unique set size, what it costs beyond shared pages), and the runner's own growth per trial.
Also the cost of ``ToolExecutor.call`` alone (no gRPC), both modes alternating call by call: the
isolation overhead without the RPC around it.

The machine's 1-minute load average is printed beside each row: the isolated path needs two
processes scheduled per call, so on a loaded machine its latency grows faster than the trusted path's.

The goal: isolated <= 1.5x trusted for the trivial tool, flat in state size, at 1 and
64 trials.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import psutil
from grpclib.exceptions import StreamTerminatedError

sys.path.insert(0, str(Path(__file__).parent))
from runner_calls import (  # pyright: ignore[reportPrivateUsage]
    PARAMS,
    TOOLS,
    Figures,
    _echo_floor,  # pyright: ignore[reportPrivateUsage]
    _measure,  # pyright: ignore[reportPrivateUsage]
    _median_row,  # pyright: ignore[reportPrivateUsage]
    _request,  # pyright: ignore[reportPrivateUsage]
    _spec,  # pyright: ignore[reportPrivateUsage]
)

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecutionStatus,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.models import TrialSpec
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerSettings, start_runner

Row = Figures
MODES: tuple[Literal["process", "thread"], ...] = ("process", "thread")


async def _case(trials: int, calls: int, records: int, tool: str, code: Path) -> dict[str, Row]:
    """Both modes in one process, measured in alternating blocks, so both see the same machine load."""
    handles = {mode: await start_runner(RunnerSettings(isolation=mode)) for mode in MODES}
    channels = {mode: handle.channel() for mode, handle in handles.items()}
    stubs = {mode: RunnerServiceStub(channel) for mode, channel in channels.items()}
    try:
        for stub in stubs.values():
            await asyncio.gather(*(_register(stub, t, code, records) for t in range(trials)))
        rows: dict[str, list[Row]] = {mode: [] for mode in MODES}
        blocks = 10
        for block in range(blocks + 1):
            for mode, stub in stubs.items():

                async def call(trial: int, n: int, stub: RunnerServiceStub = stub) -> None:
                    arguments = {"text": "hello"} if tool == "ping" else {"index": n % max(records, 1)}
                    result = await stub.execute_tool(_request(f"t:{trial}", tool, arguments, n))
                    assert result.status == ExecutionStatus.SUCCESS, result.error_message

                row = await _measure(trials, max(calls // blocks, trials), call)
                if block:  # block 0 warms both up
                    rows[mode].append(row)
        return {mode: _median_row(mode_rows) for mode, mode_rows in rows.items()}
    finally:
        for channel in channels.values():
            channel.close()
        for handle in handles.values():
            await handle.close()


async def _executor_case(records: int, calls: int, code: Path) -> dict[str, float]:
    """Per-call microseconds of ToolExecutor.call alone (no gRPC), both modes alternating per call."""
    runners = {mode: await start_runner(RunnerSettings(isolation=mode)) for mode in MODES}
    try:
        trials: dict[str, Any] = {}
        for mode, handle in runners.items():
            registry = handle.servicer.runner.registry
            await registry.register(TrialSpec.model_validate_json(_spec("t:0", code, records)))
            trials[mode] = registry.get("t:0")
        spent: dict[str, list[float]] = {mode: [] for mode in MODES}
        for n in range(calls + 200):
            for mode, handle in runners.items():
                started = time.perf_counter()
                outcome = await handle.servicer.runner.executor.call(
                    trials[mode],
                    call_id=f"c{n}",
                    tool_name="ping",
                    arguments_json='{"text": "x"}',
                    executor="agent",
                )
                if n >= 200:  # the first 200 warm up
                    spent[mode].append(time.perf_counter() - started)
                assert outcome.status == ExecutionStatus.SUCCESS
        return {mode: statistics.median(values) * 1e6 for mode, values in spent.items()}
    finally:
        for handle in runners.values():
            await handle.close()


async def _register(stub: RunnerServiceStub, trial: int, code: Path, records: int) -> None:
    response = await stub.register_trial(
        RegisterTrialRequest(
            trial_id=f"t:{trial}",
            trial_spec_json=_spec(f"t:{trial}", code, records),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )
    )
    assert response.success, response.error


async def _idle_rss(code: Path, trials: int, records: int) -> tuple[float, float, float]:
    """(worker RSS MiB, worker USS MiB, runner RSS growth MiB) per idle trial."""
    me = psutil.Process()
    gc.collect()
    before = me.memory_info().rss
    handle = await start_runner(RunnerSettings(isolation="process"))
    channel = handle.channel()
    stub = RunnerServiceStub(channel)
    try:
        for trial in range(trials):
            await _register(stub, trial, code, records)
        # Forked workers are the zygote's children; the zygote itself (one per code) is not a trial's.
        zygotes = {p.pid for p in me.children() if "workers.zygote" in " ".join(p.cmdline())}
        workers = [p for p in me.children(recursive=True) if p.pid not in zygotes]
        rss = statistics.mean(p.memory_info().rss for p in workers) / 2**20
        uss = statistics.mean(p.memory_full_info().uss for p in workers) / 2**20
        gc.collect()
        growth = (me.memory_info().rss - before) / trials / 2**20
        for trial in range(trials):
            await stub.cleanup_trial(CleanupTrialRequest(trial_id=f"t:{trial}"))
        return rss, uss, growth
    finally:
        channel.close()
        await handle.close()


def _fmt(row: Row) -> str:
    return f"{row[0]:8.0f}/s p50 {row[1]:6.3f} ms p99 {row[2]:6.3f} ms"


def _in_fresh_process(*case: str) -> dict[str, Row]:
    """One case in a fresh interpreter, so no case inherits another's heap, threads or children."""
    out = subprocess.run(
        [sys.executable, __file__, "--case", *case], check=True, capture_output=True, text=True
    ).stdout
    rows = json.loads(out.strip().splitlines()[-1])
    return {mode: Figures(*row) for mode, row in rows.items()}


async def _spinning_neighbour(isolation: str, calls: int, code: Path) -> tuple[float, float]:
    """(calm trial's p50 ms alone, with another trial's tool spinning the CPU) under ``isolation``."""
    spin = (
        "class Spin:\n    @staticmethod\n    def invoke(data, text):\n        while True:\n            pass\n"
    )
    (code / "tools.py").write_text(TOOLS + "\n" + spin)
    handle = await start_runner(
        RunnerSettings(
            isolation="thread" if isolation == "thread" else "process", default_tool_timeout_s=30.0
        )
    )
    channel = handle.channel()
    stub = RunnerServiceStub(channel)
    try:
        for trial in range(2):
            spec = json.loads(_spec(f"t:{trial}", code, 100))
            spec["task"]["agent_tools"].append(
                {
                    "name": "spin",
                    "parameters": PARAMS["Ping"],
                    "source": {"module_path": "tools", "class_name": "Spin"},
                }
            )
            response = await stub.register_trial(
                RegisterTrialRequest(
                    trial_id=f"t:{trial}",
                    trial_spec_json=json.dumps(spec),
                    engine_protocol_version=ENGINE_PROTOCOL_VERSION,
                )
            )
            assert response.success, response.error

        async def call(trial: int, n: int) -> None:
            await stub.execute_tool(_request("t:1", "ping", {"text": "hello"}, n))

        await _measure(1, 200, call)
        alone = (await _measure(1, calls, call))[1]
        spinning = asyncio.create_task(stub.execute_tool(_request("t:0", "spin", {"text": "x"}, 0)))
        await asyncio.sleep(0.2)
        beside = (await _measure(1, calls, call))[1]
        spinning.cancel()
        with contextlib.suppress(asyncio.CancelledError, StreamTerminatedError):
            await spinning
        return alone, beside
    finally:
        channel.close()
        await handle.close()


def main(calls: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp)
        (code / "tools.py").write_text(TOOLS)
        print(f"python {sys.version.split()[0]}, {psutil.cpu_count()} cores; medians of {rounds} rounds")
        print(f"{'case':34} {'isolated (process)':40} {'trusted (thread)':40} ratio p50")
        for trials, records in ((1, 100), (1, 100_000), (64, 100), (8, 100_000)):
            for tool in ("ping", "touch"):
                case = (str(trials), str(calls), str(records), tool, str(code))
                rows = [_in_fresh_process(*case) for _ in range(rounds)]
                iso = _median_row([r["process"] for r in rows])
                thr = _median_row([r["thread"] for r in rows])
                label = f"{tool} {trials:>2} trial(s) x {records:>6} records"
                load = os.getloadavg()[0]
                print(
                    f"{label:34} {_fmt(iso):40} {_fmt(thr):40} {iso[1] / thr[1]:5.2f}x  (load {load:.1f})",
                    flush=True,
                )
            floor = asyncio.run(_echo_floor(trials, calls))
            print(f"{'  floor: bare grpclib echo':34} {_fmt(floor)}", flush=True)
        for records in (100, 100_000):
            micro = asyncio.run(_executor_case(records, min(calls, 2000), code))
            print(
                f"ToolExecutor.call alone (no gRPC), ping, 1 trial x {records:>6} records: "
                f"process {micro['process']:6.1f} us, thread {micro['thread']:6.1f} us "
                f"({micro['process'] / micro['thread']:4.2f}x)  (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
        for isolation in ("process", "thread"):
            alone, beside = asyncio.run(_spinning_neighbour(isolation, min(calls, 500), code))
            print(
                f"{isolation}: a calm trial's p50 {alone:6.3f} ms alone, {beside:6.3f} ms beside a spinning "
                f"tool ({beside / alone:4.2f}x)",
                flush=True,
            )
        (code / "tools.py").write_text(TOOLS)
        for records in (100, 100_000):
            rss, uss, growth = asyncio.run(_idle_rss(code, 8, records))
            print(
                f"idle trial, {records:>6} records: worker RSS {rss:6.1f} MiB (unique {uss:6.1f} MiB); "
                f"runner +{growth:6.1f} MiB per trial"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        trials, calls, records, tool, code = args.case
        print(json.dumps(asyncio.run(_case(int(trials), int(calls), int(records), tool, Path(code)))))
    else:
        main(args.calls, args.rounds)
