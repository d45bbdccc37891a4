"""A tool provider answers only the process that started it, and serves only what the pack enabled.

Every provider here is a real subprocess (the built-in exec and fs providers) spoken to over real gRPC,
on a unix socket as the sandboxed runner does, or on loopback TCP as a provider started by hand. The
last tests play a hostile process of the runner's own user: it finds a provider the runner started
(its socket or port, its environment) and calls it without the runner's token.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import grpclib.client
import psutil
import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from tolokaforge.contracts.runner import ExecuteToolRequest, ExecutionStatus, RegisterTrialRequest
from tolokaforge.contracts.tool import (
    CallContext,
    ConfigureRequest,
    DescribeRequest,
    GetSchemaRequest,
    InvokeRequest,
    InvokeResponse,
    ToolErrorCategory,
    ToolProviderServiceStub,
)
from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.runner import RunnerHandle, RunnerSettings, start_runner
from tolokaforge.sdk.providers import (
    PROVIDER_ENABLED_ENV,
    PROVIDER_RESERVED_ENV,
    PROVIDER_SOCKET_ENV,
    PROVIDER_TOKEN_ENV,
    PROVIDER_TOKEN_FD_ENV,
    is_handshake_line,
    parse_handshake,
)

EXEC = (sys.executable, "-m", "tolokaforge_provider_exec.server")
FS = (sys.executable, "-m", "tolokaforge_provider_fs.server")
HANDSHAKE_WAIT_S = 15.0
"""A bound on waiting for the handshake, so a broken provider fails the test instead of hanging it."""

Rpc = Literal["Describe", "GetSchema", "Configure", "Invoke"]
RPCS: tuple[Rpc, ...] = ("Describe", "GetSchema", "Configure", "Invoke")
TokenVia = Literal["fd", "env", "none"]


@dataclass
class Endpoint:
    """A provider's address (and the workspace calls name), whoever started it."""

    channel: grpclib.client.Channel
    workspace: Path

    def stub(self, authorization: str | None) -> ToolProviderServiceStub:
        metadata = {"authorization": authorization} if authorization is not None else {}
        return ToolProviderServiceStub(self.channel, timeout=10.0, metadata=metadata)


@dataclass
class Provider(Endpoint):
    """A provider this test started, and its token."""

    process: asyncio.subprocess.Process
    token: str

    @property
    def bearer(self) -> str:
        return f"Bearer {self.token}"


def _base_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in PROVIDER_RESERVED_ENV}


@asynccontextmanager
async def started(
    argv: Sequence[str],
    workspace: Path,
    *,
    enabled: Sequence[str] | None = None,
    via: TokenVia = "fd",
    unix: bool = True,
) -> AsyncGenerator[Provider]:
    """Start a provider the way the runner does (token on stdin, ``via="fd"``) or by hand (``"env"``)."""
    token = secrets.token_urlsafe(32)
    env = _base_env()
    socket_dir = tempfile.mkdtemp(prefix="tf-test-")  # short: a socket path is limited to 107 bytes
    if unix:
        env[PROVIDER_SOCKET_ENV] = os.path.join(socket_dir, "provider.sock")
    if via == "fd":
        env[PROVIDER_TOKEN_FD_ENV] = "0"
    elif via == "env":
        env[PROVIDER_TOKEN_ENV] = token
    if enabled is not None:
        env[PROVIDER_ENABLED_ENV] = json.dumps(list(enabled))
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=workspace,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    if via == "fd":
        process.stdin.write(token.encode() + b"\n")
    process.stdin.close()
    channel: grpclib.client.Channel | None = None
    try:
        async with asyncio.timeout(HANDSHAKE_WAIT_S):
            line = (await process.stdout.readline()).decode()
        assert is_handshake_line(line), (line, await _stderr(process))
        handshake = parse_handshake(line)
        if unix:
            assert handshake.path == env[PROVIDER_SOCKET_ENV]
            channel = grpclib.client.Channel(path=handshake.path)
        else:
            assert handshake.path is None
            channel = grpclib.client.Channel(handshake.host, handshake.port)
        yield Provider(channel, workspace, process, token)
    finally:
        if channel is not None:
            channel.close()
        if process.returncode is None:
            process.terminate()
        await process.wait()
        shutil.rmtree(socket_dir, ignore_errors=True)


async def _stderr(process: asyncio.subprocess.Process) -> str:
    assert process.stderr is not None
    process.kill()
    return (await process.stderr.read()).decode(errors="replace")


def _invoke_request(provider: Endpoint, operation: str, arguments: dict[str, Any]) -> InvokeRequest:
    return InvokeRequest(
        operation=operation,
        arguments_json=json.dumps(arguments),
        call_context=CallContext(
            trial_id="t",
            call_id="c",
            working_directory=str(provider.workspace),
            timeout_seconds=10.0,
            attempt=1,
        ),
    )


async def call(
    provider: Endpoint,
    rpc: Rpc,
    authorization: str | None,
    *,
    operation: str = "run",
    arguments: dict[str, Any] | None = None,
    config_json: str = "{}",
) -> list[InvokeResponse] | None:
    """One call; an Invoke's events (other RPCs: None). A refused call raises its GRPCError."""
    stub = provider.stub(authorization)
    if rpc == "Describe":
        await stub.describe(DescribeRequest())
    elif rpc == "GetSchema":
        await stub.get_schema(GetSchemaRequest())
    elif rpc == "Configure":
        await stub.configure(ConfigureRequest(config_json=config_json))
    else:
        request = _invoke_request(provider, operation, arguments or {})
        return [event async for event in stub.invoke(request)]
    return None


async def refusal(provider: Endpoint, rpc: Rpc, authorization: str | None, **kwargs: Any) -> GRPCError:
    with pytest.raises(GRPCError) as raised:
        await call(provider, rpc, authorization, **kwargs)
    return raised.value


async def refused(provider: Endpoint, rpc: Rpc, authorization: str | None, **kwargs: Any) -> Status:
    return (await refusal(provider, rpc, authorization, **kwargs)).status


def _wrong_authorizations(token: str) -> dict[str, str | None]:
    return {
        "none": None,
        "another token": f"Bearer {secrets.token_urlsafe(32)}",
        "the token less its last character": f"Bearer {token[:-1]}",
        "the token and one more character": f"Bearer {token}x",
        "the token without the Bearer scheme": token,
        "the token under another scheme": f"Basic {token}",
        "an empty bearer": "Bearer ",
    }


def _touch_command(workspace: Path) -> dict[str, Any]:
    return {"command": ["touch", str(workspace / "ran.txt")]}


@pytest.mark.parametrize(
    ("argv", "operation", "arguments"),
    [(EXEC, "calculator", {"expression": "(3 + 4) * 2"}), (FS, "list", {})],
    ids=["exec", "fs"],
)
async def test_every_rpc_without_the_providers_token_is_unauthenticated(
    tmp_path: Path, argv: Sequence[str], operation: str, arguments: dict[str, Any]
) -> None:
    async with started(argv, tmp_path) as provider:
        for what, authorization in _wrong_authorizations(provider.token).items():
            for rpc in RPCS:
                kwargs: dict[str, Any] = {"config_json": '{"anything": 1}'}
                if rpc == "Invoke":
                    kwargs = {"operation": "run", "arguments": _touch_command(tmp_path)}
                status = await refused(provider, rpc, authorization, **kwargs)
                assert status == Status.UNAUTHENTICATED, (what, rpc, status)
        assert not (tmp_path / "ran.txt").exists(), "an unauthenticated Invoke ran its command"
        # None of the refused calls changed anything: the runner's own Configure is still the first.
        await call(provider, "Describe", provider.bearer)
        await call(provider, "Configure", provider.bearer)
        events = await call(provider, "Invoke", provider.bearer, operation=operation, arguments=arguments)
        assert events is not None and events[-1].result is not None, events


async def test_configure_is_taken_once_and_comes_before_any_invoke(tmp_path: Path) -> None:
    async with started(EXEC, tmp_path) as provider:
        calculator: dict[str, Any] = {"operation": "calculator", "arguments": {"expression": "1 + 1"}}
        assert await refused(provider, "Invoke", provider.bearer, **calculator) == Status.FAILED_PRECONDITION
        await call(provider, "Configure", provider.bearer)
        for config in ("{}", '{"shell": true}'):
            again = await refused(provider, "Configure", provider.bearer, config_json=config)
            assert again == Status.FAILED_PRECONDITION, config
        events = await call(provider, "Invoke", provider.bearer, **calculator)
        assert events is not None and events[-1].result is not None
        assert json.loads(events[-1].result.output_json)["result"] == 2


async def _configured(provider: Provider) -> None:
    await call(provider, "Configure", provider.bearer)


async def test_exec_serves_only_the_calculator_when_the_pack_enabled_only_it(tmp_path: Path) -> None:
    async with started(EXEC, tmp_path, enabled=["calculator"]) as provider:
        await _configured(provider)
        schema = await provider.stub(provider.bearer).get_schema(GetSchemaRequest())
        assert [operation.name for operation in schema.operations] == ["calculator"]
        events = await call(provider, "Invoke", provider.bearer, arguments=_touch_command(tmp_path))
        assert events is not None and len(events) == 1 and events[0].error is not None, events
        error = events[0].error
        assert error.category == ToolErrorCategory.PERMISSION_DENIED and not error.retryable
        assert "'run' is not enabled" in error.message
        assert json.loads(error.details_json) == {"operation": "run", "enabled": ["calculator"]}
        assert not (tmp_path / "ran.txt").exists(), "a disabled operation ran"
        unknown = await call(provider, "Invoke", provider.bearer, operation="no_such_operation")
        assert unknown is not None and unknown[-1].error is not None
        assert unknown[-1].error.category == ToolErrorCategory.NOT_FOUND
        result = await call(
            provider, "Invoke", provider.bearer, operation="calculator", arguments={"expression": "6 * 7"}
        )
        assert result is not None and result[-1].result is not None
        assert json.loads(result[-1].result.output_json)["result"] == 42


async def test_fs_serves_only_reading_when_the_pack_enabled_only_read(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("kept")
    async with started(FS, tmp_path, enabled=["read"]) as provider:
        await _configured(provider)
        written = await call(
            provider,
            "Invoke",
            provider.bearer,
            operation="write",
            arguments={"path": "notes.txt", "content": "overwritten"},
        )
        assert written is not None and written[-1].error is not None
        assert written[-1].error.category == ToolErrorCategory.PERMISSION_DENIED
        assert (tmp_path / "notes.txt").read_text() == "kept"
        read = await call(
            provider, "Invoke", provider.bearer, operation="read", arguments={"path": "notes.txt"}
        )
        assert read is not None and read[-1].result is not None
        assert json.loads(read[-1].result.output_json)["content"] == "kept"


async def test_the_runners_token_is_in_neither_argv_nor_environment(tmp_path: Path) -> None:
    async with started(EXEC, tmp_path) as provider:
        await _configured(provider)
        seen = psutil.Process(provider.process.pid)
        assert provider.token not in " ".join(seen.cmdline())
        environment = seen.environ()
        assert provider.token not in json.dumps(environment)
        assert environment[PROVIDER_TOKEN_FD_ENV] == "0" and PROVIDER_TOKEN_ENV not in environment
        # The commands it runs read its /proc as any process of the user can: no token there either.
        parent = f"/proc/{provider.process.pid}"
        command = ["sh", "-c", f"env; echo; cat {parent}/environ {parent}/cmdline"]
        events = await call(provider, "Invoke", provider.bearer, arguments={"command": command})
        assert events is not None and events[-1].result is not None, events
        output: str = json.loads(events[-1].result.output_json)["stdout"]
        assert output.count(PROVIDER_TOKEN_FD_ENV) == 1, "the provider's commands inherited its variables"
        assert provider.token not in output


async def test_a_provider_started_by_hand_over_tcp_needs_the_token_from_its_environment(
    tmp_path: Path,
) -> None:
    async with started(EXEC, tmp_path, via="env", unix=False) as provider:
        for rpc in RPCS:
            assert await refused(provider, rpc, None) == Status.UNAUTHENTICATED, rpc
            assert (
                await refused(provider, rpc, f"Bearer {secrets.token_urlsafe(32)}") == Status.UNAUTHENTICATED
            )
        await _configured(provider)
        # The token is taken out of its environment: the commands it runs do not inherit it.
        events = await call(provider, "Invoke", provider.bearer, arguments={"command": ["env"]})
        assert events is not None and events[-1].result is not None
        output = json.loads(events[-1].result.output_json)["stdout"]
        assert provider.token not in output and PROVIDER_TOKEN_ENV not in output


@pytest.mark.parametrize(
    ("env", "stdin", "says"),
    [
        ({}, b"", PROVIDER_TOKEN_ENV),
        ({PROVIDER_TOKEN_ENV: "short"}, b"", "at least 32"),
        ({PROVIDER_TOKEN_ENV: "has spaces " * 4}, b"", "without spaces"),
        ({PROVIDER_TOKEN_FD_ENV: "0"}, b"", "empty token"),
        ({PROVIDER_TOKEN_FD_ENV: "zero"}, b"", "not a file descriptor"),
        ({PROVIDER_TOKEN_ENV: "t" * 40, PROVIDER_ENABLED_ENV: "calculator"}, b"", PROVIDER_ENABLED_ENV),
        ({PROVIDER_TOKEN_ENV: "t" * 40, PROVIDER_ENABLED_ENV: '{"run": 1}'}, b"", PROVIDER_ENABLED_ENV),
    ],
    ids=["no-token", "short", "spaces", "empty-stdin", "bad-fd", "enabled-not-json", "enabled-not-list"],
)
async def test_a_provider_without_a_usable_token_does_not_start(
    tmp_path: Path, env: dict[str, str], stdin: bytes, says: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        *EXEC,
        env={**_base_env(), **env},
        cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(HANDSHAKE_WAIT_S):
        stdout, stderr = await process.communicate(stdin)
    assert process.returncode == 2, (stdout, stderr)
    assert stdout == b"", "a provider without a usable token printed a handshake"
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines


# A hostile process of the runner's own user, against providers the runner started.


def _providers_of_this_process() -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "tolokaforge_provider_exec.server" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def _address(processes: list[psutil.Process]) -> grpclib.client.Channel:
    """Where the runner's provider listens, found as any process of the user could."""
    for process in processes:
        path = process.environ().get(PROVIDER_SOCKET_ENV)
        if path:
            return grpclib.client.Channel(path=path)
    for process in processes:
        for connection in process.net_connections(kind="tcp"):
            if connection.status == psutil.CONN_LISTEN:
                return grpclib.client.Channel(connection.laddr.ip, connection.laddr.port)
    raise AssertionError("the runner's provider listens nowhere to be found")


@pytest.fixture(params=["process", "sandbox"])
async def runner(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunnerHandle]:
    handle = await start_runner(RunnerSettings(work_dir=tmp_path, isolation=request.param), serve=False)
    try:
        yield handle
    finally:
        await handle.close()


async def test_a_runners_provider_answers_the_runner_alone(runner: RunnerHandle, tmp_path: Path) -> None:
    # What a public-style pack that enables the calculator gets: the exec provider, calculator only. Its
    # env tries to widen the list and to choose the token: the runner's own variables win.
    server = {
        "name": "calculator",
        "protocol": "provider",
        "command": list(EXEC),
        "enabled": ["calculator"],
        "env": {
            PROVIDER_ENABLED_ENV: '["run", "calculator"]',
            PROVIDER_TOKEN_ENV: "k" * 40,
            PROVIDER_TOKEN_FD_ENV: "7",
        },
    }
    spec = {
        "trial_id": "calc:0",
        "task": {"task_id": "calc", "agent_tools": [], "user_tools": [], "tool_servers": [server]},
    }
    stub = runner.servicer
    registered = await stub.register_trial(
        RegisterTrialRequest(
            trial_id="calc:0",
            trial_spec_json=json.dumps(spec),
            engine_protocol_version=ENGINE_PROTOCOL_VERSION,
        )
    )
    assert registered.success, registered.error
    assert [schema.name for schema in registered.tool_schemas] == ["calculator"]

    async def calculate(call_id: str) -> None:
        reply = await stub.execute_tool(
            ExecuteToolRequest(
                trial_id="calc:0",
                tool_name="calculator",
                arguments_json=json.dumps({"expression": "2 ** 10"}),
                executor="agent",
                call_id=call_id,
            )
        )
        assert reply.status == ExecutionStatus.SUCCESS, reply
        assert json.loads(reply.output)["result"] == 1024

    await calculate("c1")
    processes = _providers_of_this_process()
    assert processes, "the runner started no exec provider"
    for process in processes:
        environment = process.environ()
        assert PROVIDER_TOKEN_ENV not in environment and environment[PROVIDER_TOKEN_FD_ENV] == "0"
        assert json.loads(environment[PROVIDER_ENABLED_ENV]) == ["calculator"]
    channel = _address(processes)
    try:
        workspace = runner.servicer.runner.registry.get("calc:0").files.workspace
        assert workspace is not None
        intruder = Endpoint(channel, workspace)
        for what, authorization in _wrong_authorizations(secrets.token_urlsafe(32)).items():
            for rpc in RPCS:
                kwargs: dict[str, Any] = {"config_json": "{}"}
                if rpc == "Invoke":
                    kwargs = {"operation": "run", "arguments": {"command": ["touch", str(workspace / "x")]}}
                error = await refusal(intruder, rpc, authorization, **kwargs)
                assert error.status == Status.UNAUTHENTICATED, (what, rpc, error)
                assert "tool provider" in (error.message or ""), error  # the provider said so itself
        assert not (workspace / "x").exists()
    finally:
        channel.close()
    await calculate("c2")  # the runner's own calls go on as before
