"""A tool provider under test: started once per session with the runner's own child-process pieces.

The runner's :class:`~tolokaforge.runner.ChildProcess` spawns the command in its own
process group, reads the ``TOLOKAFORGE_TOOL_PROVIDER|<version>|tcp|<host:port>`` handshake and drains
the pipes; the generated ``ToolProviderServiceStub`` does the talking. As the runner does, the plugin
makes the provider a token, hands it over on its stdin (``TOLOKAFORGE_PROVIDER_TOKEN_FD=0``) and sends it
on every call; every operation is enabled. Describe, GetSchema and an empty Configure are asked once at
start and kept; every Invoke is collected into an :class:`InvokeOutcome`; :meth:`ProviderUnderTest.answer`
makes one call with the token of the caller's choice.
:meth:`ProviderUnderTest.stop` kills the whole process tree and removes the scratch workspace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpclib
import grpclib.client
import grpclib.exceptions

from tolokaforge.contracts.tool import (
    CallContext,
    ConfigureRequest,
    DescribeRequest,
    DescribeResponse,
    GetSchemaRequest,
    GetSchemaResponse,
    InvokeRequest,
    ToolError,
    ToolErrorCategory,
    ToolProviderServiceStub,
)
from tolokaforge.core.credentials import bearer, new_token
from tolokaforge.runner import ChildProcess
from tolokaforge.sdk.providers import (
    PROVIDER_RESERVED_ENV,
    PROVIDER_TOKEN_FD_ENV,
    Handshake,
    HandshakeError,
)

__all__ = [
    "HANDSHAKE_DEADLINE_S",
    "INVOKE_TIMEOUT_S",
    "RPCS",
    "InvokeOutcome",
    "ProviderUnderTest",
    "Rpc",
    "details_object",
]

HANDSHAKE_DEADLINE_S = 15.0
RPC_TIMEOUT_S = 10.0
INVOKE_TIMEOUT_S = 10.0

Rpc = Literal["Describe", "GetSchema", "Configure", "Invoke"]
RPCS: tuple[Rpc, ...] = ("Describe", "GetSchema", "Configure", "Invoke")


@dataclass
class InvokeOutcome:
    """What one Invoke stream said: its terminal event (result or error), or why there was none."""

    events: list[str] = field(default_factory=list[str])
    result_json: str | None = None
    error: ToolError | None = None
    transport: str | None = None
    """A gRPC status or a broken stream instead of a terminal event."""


class ProviderUnderTest:
    """One provider process for the whole session; ``start`` never raises, it records ``start_error``."""

    def __init__(self, argv: tuple[str, ...]) -> None:
        self.argv = argv
        self.command = " ".join(argv)
        self.handshake: Handshake | None = None
        self.described: DescribeResponse | None = None
        self.schema: GetSchemaResponse | None = None
        self.describe_error: str | None = None
        self.schema_error: str | None = None
        self.configure_error: str | None = None
        self.start_error: str | None = None
        self._child: ChildProcess | None = None
        self._channel: grpclib.client.Channel | None = None
        self._stub: ToolProviderServiceStub | None = None
        self._workspace: Path | None = None
        self._calls = itertools.count(1)
        self.token = new_token()

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    async def start(self) -> None:
        self._workspace = Path(tempfile.mkdtemp(prefix="tolokaforge-provider-"))
        try:
            # This process's environment, less what only the starter of a provider sets; the token on stdin.
            env = {key: value for key, value in os.environ.items() if key not in PROVIDER_RESERVED_ENV}
            self._child = await ChildProcess.spawn(
                self.argv,
                cwd=self._workspace,
                env={**env, PROVIDER_TOKEN_FD_ENV: "0"},
                stdin_data=self.token.encode("ascii") + b"\n",
            )
        except OSError as error:
            self.start_error = f"cannot start {self.argv[0]!r}: {error}"
            return
        try:
            self.handshake = await self._child.read_handshake(HANDSHAKE_DEADLINE_S)
        except HandshakeError as error:
            self.start_error = f"no usable handshake: {error}"
            return
        self._channel = grpclib.client.Channel(self.handshake.host, self.handshake.port)
        self._stub = ToolProviderServiceStub(
            self._channel, timeout=RPC_TIMEOUT_S, metadata={"authorization": bearer(self.token)}
        )
        try:
            self.described = await self._stub.describe(DescribeRequest())
        except (grpclib.GRPCError, grpclib.exceptions.StreamTerminatedError, OSError, TimeoutError) as error:
            self.describe_error = f"Describe failed: {_transport(error)}"
        try:
            self.schema = await self._stub.get_schema(GetSchemaRequest())
        except (grpclib.GRPCError, grpclib.exceptions.StreamTerminatedError, OSError, TimeoutError) as error:
            self.schema_error = f"GetSchema failed: {_transport(error)}"
        try:
            configured = await self._stub.configure(ConfigureRequest(config_json="{}"))
            if configured.error is not None and configured.error.category != ToolErrorCategory.UNSPECIFIED:
                self.configure_error = f"Configure({{}}) refused: {configured.error.message}"
        except (grpclib.GRPCError, grpclib.exceptions.StreamTerminatedError, OSError, TimeoutError) as error:
            self.configure_error = f"Configure failed: {_transport(error)}"

    async def invoke(self, operation: str, arguments_json: str) -> InvokeOutcome:
        """One Invoke, collected; a stream that does not end within INVOKE_TIMEOUT_S is a transport failure."""
        outcome = InvokeOutcome()
        if self._stub is None or self._workspace is None:
            outcome.transport = self.start_error or "the provider is not running"
            return outcome
        request = self._invoke_request(operation, arguments_json)
        try:
            async for event in self._stub.invoke(request, timeout=INVOKE_TIMEOUT_S):
                if event.result is not None:
                    outcome.events.append("result")
                    outcome.result_json = event.result.output_json
                elif event.error is not None:
                    outcome.events.append("error")
                    outcome.error = event.error
                elif event.exit_status is not None:
                    outcome.events.append("exit_status")
                elif event.output_chunk is not None:
                    outcome.events.append("output_chunk")
                elif event.progress is not None:
                    outcome.events.append("progress")
        except (grpclib.GRPCError, grpclib.exceptions.StreamTerminatedError, OSError, TimeoutError) as error:
            outcome.transport = _transport(error)
        return outcome

    async def answer(self, rpc: Rpc, authorization: str | None) -> str:
        """Make one ``rpc`` call with ``authorization`` metadata (None: none): ``OK``, the gRPC status's
        name, or how the transport failed. Configure sends ``{}``; Invoke an operation no provider has."""
        if self._channel is None or self._workspace is None:
            return self.start_error or "the provider is not running"
        metadata = {"authorization": authorization} if authorization is not None else {}
        stub = ToolProviderServiceStub(self._channel, timeout=RPC_TIMEOUT_S, metadata=metadata)
        try:
            if rpc == "Describe":
                await stub.describe(DescribeRequest())
            elif rpc == "GetSchema":
                await stub.get_schema(GetSchemaRequest())
            elif rpc == "Configure":
                await stub.configure(ConfigureRequest(config_json="{}"))
            else:
                request = self._invoke_request("tolokaforge_no_such_operation", "{}")
                async for _ in stub.invoke(request, timeout=INVOKE_TIMEOUT_S):
                    pass
        except grpclib.GRPCError as error:
            return error.status.name
        except (grpclib.exceptions.StreamTerminatedError, OSError, TimeoutError) as error:
            return _transport(error)
        return "OK"

    def _invoke_request(self, operation: str, arguments_json: str) -> InvokeRequest:
        return InvokeRequest(
            operation=operation,
            arguments_json=arguments_json,
            call_context=CallContext(
                trial_id="tolokaforge-conformance",
                call_id=f"conformance-{next(self._calls)}",
                working_directory=str(self._workspace),
                timeout_seconds=INVOKE_TIMEOUT_S,
                attempt=1,
            ),
        )

    async def stop(self) -> None:
        channel, child, workspace = self._channel, self._child, self._workspace
        self._channel = self._stub = self._child = self._workspace = None
        if channel is not None:
            channel.close()
        if child is not None:
            await child.stop()
        if workspace is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(workspace)


def _transport(error: BaseException) -> str:
    if isinstance(error, grpclib.GRPCError):
        return f"gRPC {error.status.name}: {error.message}"
    if isinstance(error, TimeoutError):
        return "no answer in time"
    return f"{type(error).__name__}: {error}"


def details_object(details_json: str) -> dict[str, Any] | None:
    """``details_json`` parsed when it is a non-empty JSON object, else None."""
    if not details_json:
        return None
    try:
        value: Any = json.loads(details_json)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None  # pyright: ignore[reportUnknownVariableType]
