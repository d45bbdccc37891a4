"""Fixtures: a real runner on 127.0.0.1 and a client stub; trial specs built over the fixture packs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # pyright: ignore[reportMissingTypeStubs]
import psutil
import pytest

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.credentials import new_token
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.db.server import serve_settings
from tolokaforge.db.settings import Settings as DbSettings
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner

FIXTURES = Path(__file__).parent / "fixtures"


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


# name -> (class in the fixture pack, parameters): the same schemas the classes' get_info() declare.
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "who_am_i": ("WhoAmI", _object({}, [])),
    "get_order": ("GetOrder", _object({"order_id": {"type": "string"}}, ["order_id"])),
    "set_status": (
        "SetStatus",
        _object(
            {
                "order_id": {"type": "string"},
                "status": {"type": "string", "enum": ["open", "paid", "cancelled"]},
            },
            ["order_id", "status"],
        ),
    ),
    "add_note": ("AddNote", _object({"text": {"type": "string"}}, ["text"])),
    "slow_write": ("SlowWrite", _object({"seconds": {"type": "number"}}, ["seconds"])),
    "explode": ("Explode", _object({}, [])),
    "write_then_fail": ("WriteThenFail", _object({}, [])),
    "wallet_owners": ("WalletOwners", _object({}, [])),
    "check_balance": ("UserCheckBalance", _object({}, [])),
}
AGENT_TOOLS = ["who_am_i", "get_order", "set_status", "add_note", "slow_write", "explode"]


def tool_description(name: str, *, timeout_s: float | None = None) -> dict[str, Any]:
    class_name, parameters = TOOLS[name]
    description: dict[str, Any] = {
        "name": name,
        "description": f"fixture tool {name}",
        "parameters": parameters,
        "source": {"module_path": "tools", "class_name": class_name},
    }
    if timeout_s is not None:
        description["timeout_s"] = timeout_s
    return description


def initial_tables() -> dict[str, Any]:
    return {
        "orders": [
            {"id": "O-1", "status": "open", "total": 10.5},
            {"id": "O-2", "status": "open", "total": 3.0},
        ],
        "notes": [],
        "wallet": {"me": {"balance": 42}},
    }


def make_spec(
    trial_id: str, *, pack: str = "pack_a", judge_model: dict[str, Any] | None = None, **task: Any
) -> dict[str, Any]:
    base_task: dict[str, Any] = {
        "task_id": trial_id.split(":")[0],
        "agent_tools": [
            tool_description(name) for name in (AGENT_TOOLS if pack == "pack_a" else ["who_am_i"])
        ],
        "user_tools": [tool_description("check_balance")] if pack == "pack_a" else [],
        "tool_code": {"path": str(FIXTURES / pack)},
        "initial_state": {"tables": initial_tables()},
    }
    base_task.update(task)
    spec: dict[str, Any] = {"trial_id": trial_id, "task": base_task}
    if judge_model is not None:
        spec["judge_model"] = judge_model
    return spec


def register_request(
    spec: dict[str, Any], *, version: int = ENGINE_PROTOCOL_VERSION, timeout: float = 0.0
) -> RegisterTrialRequest:
    return RegisterTrialRequest(
        trial_id=spec["trial_id"],
        trial_spec_json=json.dumps(spec),
        engine_protocol_version=version,
        default_tool_timeout_s=timeout,
    )


ADMIN_DSN = os.environ.get("TOLOKAFORGE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _admin(sql: str) -> None:
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    connection: Any = await connect(ADMIN_DSN)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


def _run_admin(sql: str) -> None:
    # Its own thread and loop: the fixture is first requested from inside a running test loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _admin(sql)).result()


@pytest.fixture(scope="session")
def runner_pg_dsn() -> Iterator[str]:
    """A fresh PostgreSQL database for the runner's http-postgres mode, dropped after the session."""
    name = f"tf_runner_test_{os.getpid()}_{secrets.token_hex(4)}"
    _run_admin(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(ADMIN_DSN)._replace(path="/" + name))
    finally:
        _run_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def store_mode() -> str:
    """Where the runner keeps state: "memory" (in-process, the embedded default) unless a module
    overrides this fixture with params to run its tests against "http-postgres" too."""
    return "memory"


@pytest.fixture
async def runner(store_mode: str, request: pytest.FixtureRequest) -> AsyncIterator[RunnerHandle]:
    if store_mode == "memory":
        handle = await start_runner(RunnerSettings())
        yield handle
        await handle.close()
        return
    # A real DB service (uvicorn, PostgreSQL store) on loopback, reached over HTTP.
    dsn: str = request.getfixturevalue("runner_pg_dsn")
    db_token = new_token()
    settings = DbSettings(store="postgres", dsn=dsn, port=0, token=db_token)
    async with serve_settings(settings) as db_url:
        handle = await start_runner(RunnerSettings(db_url=db_url, db_token=db_token))
        try:
            yield handle
        finally:
            # The database outlives this test: free what it registered so ids can be reused.
            for trial_id in handle.servicer.runner.registry.trial_ids():
                await handle.servicer.runner.registry.cleanup(trial_id)
            await handle.close()


@pytest.fixture
async def stub(runner: RunnerHandle) -> AsyncIterator[RunnerServiceStub]:
    channel = runner.channel()
    yield RunnerServiceStub(channel)
    channel.close()


@pytest.fixture
def spec_factory() -> Callable[..., dict[str, Any]]:
    """``spec_factory(trial_id, **task_overrides)`` -> a TrialSpec dict over the fixture pack."""
    return make_spec


@pytest.fixture
def request_for() -> Callable[..., RegisterTrialRequest]:
    """``request_for(spec, version=..., timeout=...)`` -> the RegisterTrialRequest carrying it."""
    return register_request


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


class Episode:
    """Drives one registered trial like a host would: tool calls through the runner, then GradeTrial."""

    def __init__(self, stub: RunnerServiceStub, trial_id: str) -> None:
        self.stub = stub
        self.trial_id = trial_id
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a careful shop assistant."},
            {"role": "user", "content": "Please help me with my order."},
        ]

    async def call(
        self, tool: str, arguments: dict[str, Any], call_id: str, *, executor: str = "agent"
    ) -> Any:
        from tolokaforge.contracts.runner import ExecuteToolRequest

        role = "assistant" if executor == "agent" else "user"
        self.messages.append(
            {
                "role": role,
                "content": "",
                "tool_calls": [
                    {"id": call_id, "function": {"name": tool, "arguments": json.dumps(arguments)}}
                ],
            }
        )
        response = await self.stub.execute_tool(
            ExecuteToolRequest(
                trial_id=self.trial_id,
                tool_name=tool,
                arguments_json=json.dumps(arguments),
                executor=executor,
                call_id=call_id,
            )
        )
        self.messages.append(
            {"role": "tool", "content": response.output or response.error_message, "tool_call_id": call_id}
        )
        return response

    def say(self, text: str, role: str = "assistant") -> None:
        self.messages.append({"role": role, "content": text})

    async def grade(self, termination_reason: str = "agent_done", *, transcript: bool = True) -> Any:
        from tolokaforge.contracts.runner import GradeTrialRequest

        return await self.stub.grade_trial(
            GradeTrialRequest(
                trial_id=self.trial_id,
                llm_messages_json=json.dumps(self.messages) if transcript else "",
                termination_reason=termination_reason,
            )
        )


@pytest.fixture
def episode(stub: RunnerServiceStub) -> Callable[[str], Episode]:
    return lambda trial_id: Episode(stub, trial_id)


# --- out-of-process tool sources (MCP servers, tool providers) ---------------------------------

SERVERS = FIXTURES / "servers"


def fixture_server(name: str, protocol: str, script: str, *args: str, **extra: Any) -> dict[str, Any]:
    """A ``tool_servers`` entry running one of fixtures/servers/ with this interpreter."""
    return {
        "name": name,
        "protocol": protocol,
        "command": [sys.executable, str(SERVERS / script), *args],
        **extra,
    }


@pytest.fixture
def server_spec() -> Callable[..., dict[str, Any]]:
    """``server_spec(trial_id, *servers)`` -> a TrialSpec whose only tools come from ``servers``."""

    def build(trial_id: str, *servers: dict[str, Any]) -> dict[str, Any]:
        return make_spec(trial_id, agent_tools=[], user_tools=[], tool_servers=list(servers))

    return build


@pytest.fixture
def call_tool(stub: RunnerServiceStub) -> Callable[..., Awaitable[ExecuteToolResponse]]:
    """``await call_tool(trial_id, tool, arguments, call_id)`` -> the ExecuteToolResponse."""

    async def call(trial_id: str, tool: str, arguments: dict[str, Any], call_id: str) -> ExecuteToolResponse:
        return await stub.execute_tool(
            ExecuteToolRequest(
                trial_id=trial_id,
                tool_name=tool,
                arguments_json=json.dumps(arguments),
                executor="agent",
                call_id=call_id,
            )
        )

    return call


def tool_processes() -> list[psutil.Process]:
    """Every live process started for a tool source: our children, and any orphan of theirs."""
    found: dict[int, psutil.Process] = {p.pid: p for p in psutil.Process().children(recursive=True)}
    markers = (str(SERVERS), "tolokaforge-tool-provider", "tolokaforge_provider_")
    repo = str(FIXTURES.parents[3])  # orphans of this checkout only: other checkouts may run on this machine
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if repo in cmdline and any(marker in cmdline for marker in markers) and not _anothers(proc):
            found[proc.pid] = proc
    return [p for p in found.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _anothers(proc: psutil.Process) -> bool:
    """Whether ``proc`` is alive under another test process (a parallel pytest worker's, not a leak of ours)."""
    try:
        ancestors = proc.parents()
    except psutil.Error:
        return False
    for ancestor in ancestors:
        if ancestor.pid == os.getpid():
            return False
        with contextlib.suppress(psutil.Error):
            if "pytest" in " ".join(ancestor.cmdline()) or "xdist" in " ".join(ancestor.cmdline()):
                return True
    return False


@pytest.fixture(scope="session", autouse=True)
def no_tool_process_leaked() -> Iterator[None]:
    """After the whole session, no child process (nor an orphaned tool process) may be left."""
    yield
    left = tool_processes()
    assert not left, f"processes left behind: {[(p.pid, p.cmdline()) for p in left]}"


def pid_namespace(pid: int) -> str:
    """The pid namespace the tools of the worker ``pid`` live in: the first one below ``pid`` that is
    not this process's (bubblewrap's, for a spawned sandboxed worker), else ``pid``'s own."""
    ours = os.readlink("/proc/self/ns/pid")
    for proc in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        with contextlib.suppress(OSError, psutil.Error):
            namespace = os.readlink(f"/proc/{proc.pid}/ns/pid")
            if namespace != ours:
                return namespace
    return os.readlink(f"/proc/{pid}/ns/pid")


def outer_pid(namespace: str, inner: int) -> int | None:
    """The pid this process sees for the process a sandboxed tool reported as ``inner`` (its own
    namespace's number); None when no such process lives."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            with open(f"/proc/{entry}/status") as status:
                for line in status:
                    if line.startswith("NSpid:") and int(line.split()[-1]) == inner:
                        return int(entry)
        except (OSError, ValueError):
            continue
    return None


def server_pid(runner: RunnerHandle, trial_id: str) -> int:
    """The pid, as this process sees it, of the (first) tool server the trial's runner started."""
    sources = runner.servicer.runner.registry.get(trial_id).tools.sources
    pid: int | None = getattr(sources[0], "pid", None)  # MCP and provider sources both say it
    assert pid is not None, "the server is not running"
    return pid


def server_outer_pid(runner: RunnerHandle, trial_id: str, inner: int) -> int:
    """The pid this process sees for a process the trial's server reported as ``inner``."""
    found = outer_pid(pid_namespace(server_pid(runner, trial_id)), inner)
    assert found is not None, f"no process {inner} in the server's namespace"
    return found
