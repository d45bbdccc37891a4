"""Benchmark: ExecuteTool round trips through a real runner, beside a bare grpclib echo floor.

    uv run python tools/bench/runner_calls.py [--calls 2000] [--durable] [--mcp | --mcp-only]

For 1 trial (sequential calls) and 64 trials (one call loop each, concurrently; 8 with the 100k
state), with a small state and a 100k-record state, it prints calls/s and p50/p99 latency of
ExecuteTool for a trivial python tool and for a tool that reads and writes one record, next to the
same figures for a grpclib + betterproto2 servicer that answers ExecuteTool with a canned response
(same payload sizes, same process, same event loop, same concurrency), measured in rounds
alternating with the case; medians over the rounds. The goal: runner overhead within 2x the echo floor, and latency
independent of state size.

``--mcp`` adds the same rows for a stdio MCP server's echo tool (1 trial; 100 records, and 100k
records to show a remote call's cost does not grow with the state either); ``--mcp-only`` prints
only those.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # pyright: ignore[reportMissingTypeStubs]
from grpclib.client import Channel
from grpclib.server import Server
from machine_cpu import machine_seconds

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    ExecuteToolRequest,
    ExecuteToolResponse,
    ExecutionStatus,
    RegisterTrialRequest,
    RunnerServiceBase,
    RunnerServiceStub,
    ToolMetrics,
)
from tolokaforge.core.credentials import new_token
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.db import Settings as DbSettings
from tolokaforge.db import serve_settings
from tolokaforge.runner import RunnerSettings, start_runner

PG_DSN = os.environ.get("TOLOKAFORGE_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")

TOOLS = textwrap.dedent(
    """
    from __future__ import annotations
    from typing import Any, NamedTuple

    class Ping:
        @staticmethod
        def invoke(data: dict[str, Any], text: str) -> str:
            return text

    class Touch:
        @staticmethod
        def invoke(data: dict[str, Any], index: int) -> str:
            record = data["records"][index]
            record["hits"] = record.get("hits", 0) + 1
            return str(record["hits"])
    """
)
MCP_SERVER = textwrap.dedent(
    """
    import json, sys

    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                      "serverInfo": {"name": "bench", "version": "0"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            text = str(params["arguments"].get("text", ""))
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
        sys.stdout.flush()
    """
)
PARAMS = {
    "Ping": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "Touch": {"type": "object", "properties": {"index": {"type": "integer"}}, "required": ["index"]},
}


class EchoServicer(RunnerServiceBase):
    """The floor: decode the request, answer a response of the same shape, nothing else."""

    async def execute_tool(self, message: ExecuteToolRequest) -> ExecuteToolResponse:
        return ExecuteToolResponse(
            status=ExecutionStatus.SUCCESS, output="ok", metrics=ToolMetrics(latency_seconds=1e-5)
        )


def _spec(trial_id: str, code: Path, records: int, *, mcp: bool = False) -> str:
    tools = [
        {"name": name.lower(), "parameters": params, "source": {"module_path": "tools", "class_name": name}}
        for name, params in PARAMS.items()
    ]
    table = [
        {"id": f"R-{i}", "name": f"record {i}", "value": i * 0.5, "tags": ["a", "b"]} for i in range(records)
    ]
    task: dict[str, Any] = {
        "task_id": "bench",
        "agent_tools": [] if mcp else tools,
        "tool_code": {"path": str(code)},
        "initial_state": {"tables": {"records": table}},
    }
    if mcp:
        task["tool_servers"] = [{"name": "bench", "protocol": "mcp", "script": "mcp_echo.py"}]
    return json.dumps({"trial_id": trial_id, "task": task})


class Figures(NamedTuple):
    rate: float
    """calls/s"""
    p50: float
    p99: float
    """latency, ms"""
    cpu: float
    """the whole machine's busy CPU per call, µs: both ends, the tool's worker, the kernel"""


async def _measure(trials: int, calls: int, make_call: Callable[[int, int], Awaitable[None]]) -> Figures:
    latencies: list[float] = []

    async def loop(trial: int) -> None:
        for n in range(calls // trials):
            started = time.perf_counter()
            await make_call(trial, n)
            latencies.append(time.perf_counter() - started)

    busy = machine_seconds()[0]
    started = time.perf_counter()
    await asyncio.gather(*(loop(t) for t in range(trials)))
    elapsed = time.perf_counter() - started
    busy = machine_seconds()[0] - busy
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return Figures(
        len(latencies) / elapsed, statistics.median(latencies) * 1e3, p99 * 1e3, busy / len(latencies) * 1e6
    )


async def _echo_floor(trials: int, calls: int) -> Figures:
    sock = socket.socket(
        socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
    )  # TCP_NODELAY needs proto set
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = Server([EchoServicer()])
    await server.start(sock=sock)
    channel = Channel("127.0.0.1", port)
    stub = RunnerServiceStub(channel)

    async def call(trial: int, n: int) -> None:
        await stub.execute_tool(_request(f"t:{trial}", "ping", {"text": "hello"}, n))

    try:
        await _measure(trials, min(calls, 200), call)  # warm-up
        return await _measure(trials, calls, call)
    finally:
        channel.close()
        server.close()
        await server.wait_closed()


def _request(trial_id: str, tool: str, arguments: dict[str, Any], n: int) -> ExecuteToolRequest:
    return ExecuteToolRequest(
        trial_id=trial_id,
        tool_name=tool,
        arguments_json=json.dumps(arguments),
        executor="agent",
        call_id=f"c{n}",
    )


async def _runner(
    trials: int,
    calls: int,
    records: int,
    tool: str,
    code: Path,
    db_url: str | None = None,
    db_token: str | None = None,
) -> Figures:
    handle = await start_runner(RunnerSettings(db_url=db_url, db_token=db_token))
    channel = handle.channel()
    stub = RunnerServiceStub(channel)
    try:
        for trial in range(trials):
            response = await stub.register_trial(
                RegisterTrialRequest(
                    trial_id=f"t:{trial}",
                    trial_spec_json=_spec(f"t:{trial}", code, records, mcp=tool == "mcp_echo"),
                    engine_protocol_version=ENGINE_PROTOCOL_VERSION,
                )
            )
            assert response.success, response.error

        async def call(trial: int, n: int) -> None:
            arguments = {"text": "hello"} if tool != "touch" else {"index": n % max(records, 1)}
            name = "echo" if tool == "mcp_echo" else tool
            result = await stub.execute_tool(_request(f"t:{trial}", name, arguments, n))
            assert result.status == ExecutionStatus.SUCCESS, result.error_message

        await _measure(trials, min(calls, 200), call)  # warm-up
        measured = await _measure(trials, calls, call)
        for trial in range(trials):  # a shared DB service keeps what is not cleaned up
            await stub.cleanup_trial(CleanupTrialRequest(trial_id=f"t:{trial}"))
        return measured
    finally:
        channel.close()
        await handle.close()


def _median_row(rows: list[Figures]) -> Figures:
    return Figures(
        *(statistics.median(row[column] for row in rows) for column in range(len(Figures._fields)))
    )


async def _durable_rows(calls: int, code: Path) -> None:
    """The write case again with the runner's state in a DB service over HTTP on PostgreSQL."""
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    admin: Any = await connect(PG_DSN)
    database = f"tf_bench_runner_{os.getpid()}"
    await admin.execute(f'CREATE DATABASE "{database}"')
    dsn = urlunsplit(urlsplit(PG_DSN)._replace(path="/" + database))
    try:
        db_token = new_token()
        async with serve_settings(DbSettings(store="postgres", dsn=dsn, port=0, token=db_token)) as db_url:
            small = await _runner(1, calls, 100, "touch", code, db_url, db_token)
            print(
                "\nrunner on a DB service over HTTP on PostgreSQL (1 trial; floor: the same call, 100 records)"
            )
            for records in (100, 100_000):
                case = await _runner(1, calls, records, "touch", code, db_url, db_token)
                print(f"{f'1 trial(s), {records:>6} records, touch':<44}{_columns(case, small)}")
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()


async def _row(n_trials: int, records: int, tool: str, calls: int, rounds: int, code: Path) -> None:
    # The floor is measured right beside each round of the case, with the same
    # concurrency, so machine noise hits both alike.
    floors: list[Figures] = []
    cases: list[Figures] = []
    for _ in range(rounds):
        floors.append(await _echo_floor(n_trials, calls))
        cases.append(await _runner(n_trials, calls, records, tool, code))
    label = f"{n_trials} trial(s), {records:>6} records, {tool}"
    print(f"{label:<44}{_columns(_median_row(cases), _median_row(floors))}", flush=True)


def _columns(case: Figures, floor: Figures) -> str:
    return (
        f"{case.rate:>10.0f}{case.p50:>9.2f}{case.p99:>9.2f}{case.cpu:>8.0f}   "
        f"{floor.rate:>8.0f}{floor.p50:>8.2f}{floor.p99:>8.2f}{floor.cpu:>8.0f}     {floor.rate / case.rate:>5.2f}x"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="floor/case pairs per case (medians shown)")
    parser.add_argument(
        "--durable",
        action="store_true",
        help="also the write case with state in a DB service on PostgreSQL (TOLOKAFORGE_BENCH_PG_DSN)",
    )
    parser.add_argument("--mcp", action="store_true", help="also a stdio MCP server's echo tool")
    parser.add_argument("--mcp-only", action="store_true", help="only the MCP rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp)
        code.chmod(0o755)  # the sandbox runs pack code as another user: it reads the code like a pack's
        (code / "tools.py").write_text(TOOLS)
        (code / "mcp_echo.py").write_text(MCP_SERVER)
        print(
            f"{'case':<44}{'calls/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'CPU µs':>8}   "
            f"floor: echo calls/s, p50, p99, CPU µs   ratio"
        )
        for trials in () if args.mcp_only else (1, 64):
            for records in (100, 100_000):
                # 64 trials of 100k records each is 6.4M records: keep the big case to 8 trials.
                n_trials = trials if records < 100_000 else min(trials, 8)
                for tool in ("ping", "touch"):
                    await _row(n_trials, records, tool, args.calls, args.rounds, code)
        if args.mcp or args.mcp_only:
            for records in (100, 100_000):
                await _row(1, records, "mcp_echo", args.calls, args.rounds, code)
        if args.durable:
            await _durable_rows(min(args.calls, 500), code)


if __name__ == "__main__":
    asyncio.run(main())
