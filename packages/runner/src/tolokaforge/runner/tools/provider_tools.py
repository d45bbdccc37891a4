"""Tool-provider plugins: a ToolProviderService subprocess per trial, spoken to over gRPC.

Setup starts the provider, reads its handshake line (with a deadline), checks the protocol version
against Describe, reads the operations from GetSchema and sends Configure. Each process gets a token of
its own, on its stdin, which every call carries; and the list of operations the pack enabled, the only
ones it serves (tolokaforge.sdk.providers.GuardedProvider). Each call is one
server-streaming Invoke whose events are collected into a Reply for the kernel to judge. A broken
transport -- UNAVAILABLE, a stream cut short, a process that exited -- is process_crashed, which only
the kernel may say: a provider sending that category about itself is a protocol violation, judged in
reactions.py. After a crash or a kill the next call starts a fresh process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import grpclib
import grpclib.client
import grpclib.exceptions
from grpclib.const import Status
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import (
    CallContext,
    ConfigureRequest,
    DescribeRequest,
    GetSchemaRequest,
    InvokeRequest,
    OperationSchema,
    ToolErrorCategory,
    ToolKind,
    ToolProviderServiceStub,
)
from tolokaforge.core.credentials import bearer, new_token
from tolokaforge.core.models import ToolDescription, ToolSource
from tolokaforge.sdk.providers import (
    PROVIDER_ENABLED_ENV,
    PROVIDER_PROTOCOL_VERSION,
    PROVIDER_RESERVED_ENV,
    PROVIDER_SOCKET_ENV,
    PROVIDER_TOKEN_FD_ENV,
    HandshakeError,
)

from ..errors import ToolFailure, ToolLoadError
from ..process.confinement import Confinement, View
from ..process.sandbox import Limits, scrubbed_env
from .child_process import ChildProcess
from .remote import CallInfo, OperationKind, OperationSpec, Reply, ReplyError
from .schema_check import SchemaCheck

__all__ = ["ProviderSource"]

HANDSHAKE_DEADLINE_S = 15.0
_SETUP_RPC_TIMEOUT_S = 10.0
"""Describe, GetSchema and Configure only: an Invoke's deadline is its call's budget."""
_INVOKE_DEADLINE_GRACE_S = 2.0
"""How long past the budget the Invoke's own gRPC deadline falls: the kernel's budget always fires first
(and answers timeout); the gRPC deadline is the provider's notice and a backstop."""
_KINDS: dict[ToolKind, OperationKind] = {
    ToolKind.RESOURCE: "resource",
    ToolKind.DATA_SOURCE: "data_source",
    ToolKind.INTERACTIVE: "interactive",
}


class ProviderSource:
    """One provider process for one trial (restarted on demand after a crash or a kill)."""

    writes_state = False  # providers keep no tables in the store; their world is the workspace

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        config: Mapping[str, Any],
        limits: Limits,
        confinement: Confinement | None = None,
        view: View | None = None,
        enabled: Sequence[str] | None = None,
        workspace_path: str | None = None,
    ) -> None:
        self.name = name
        self._workspace_path = workspace_path
        """Where the provider finds the workspace when not at its own path (a mount the view makes)."""
        self._argv = list(argv)
        self._cwd = cwd
        # Only what the pack declares, never the runner's own environment (API keys live there); and
        # never the variables that say who may call the provider and what it serves: those are the
        # runner's alone.
        declared = {key: value for key, value in env.items() if key not in PROVIDER_RESERVED_ENV}
        if enabled is not None:
            declared[PROVIDER_ENABLED_ENV] = json.dumps(list(enabled))
        self._env = scrubbed_env(declared, home=str(cwd))
        self._limits = limits
        self._confinement = confinement
        self._view = view
        self._socket_dir: Path | None = None
        self._config_json = json.dumps(dict(config))
        self._child: ChildProcess | None = None
        self._channel: grpclib.client.Channel | None = None
        self._stub: ToolProviderServiceStub | None = None
        self._operations: list[str] = []
        self._start_lock = asyncio.Lock()

    @property
    def identity(self) -> str:
        return "provider:" + " ".join(self._argv)

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    async def setup(self) -> list[tuple[OperationSpec, ToolDescription]]:
        schemas = await self._start()
        self._operations = [schema.name for schema in schemas]
        return [_describe_operation(self.name, schema) for schema in schemas]

    async def invoke(self, operation: str, arguments: Mapping[str, Any], call: CallInfo) -> Reply:
        stub = await self._ensure_started()
        request = InvokeRequest(
            operation=operation,
            arguments_json=json.dumps(dict(arguments)),
            call_context=CallContext(
                trial_id=call.trial_id,
                call_id=call.call_id,
                working_directory=self._workspace_path or call.working_directory,
                timeout_seconds=call.timeout_seconds,
                attempt=call.attempt,
            ),
        )
        reply = Reply()
        terminal = False
        try:
            # An explicit deadline: the stub's default is the setup RPCs' 10 s, which would end any
            # longer call as a dead transport.
            deadline = call.timeout_seconds + _INVOKE_DEADLINE_GRACE_S
            async for event in stub.invoke(request, timeout=deadline):
                if terminal:
                    raise _violation(self.name, operation, "an event followed the terminal event")
                terminal = _collect(reply, event)
        except TimeoutError:
            # A deadline, not a dead process: the kernel answers timeout and recycles the provider.
            # (TimeoutError is an OSError, which the transport clause below would call a crash.)
            raise
        except grpclib.GRPCError as error:
            if error.status == Status.UNAVAILABLE or self._exited():
                raise await self._crashed(operation, f"gRPC {error.status.name}: {error.message}") from error
            return _grpc_error_reply(error)
        except (grpclib.exceptions.StreamTerminatedError, ConnectionError, OSError) as error:
            raise await self._crashed(operation, f"{type(error).__name__}: {error}") from error
        except ValueError as error:
            # An event that does not decode (a string that is not UTF-8): the call's answer is unreadable.
            return Reply(
                error=ReplyError(
                    ToolErrorCategory.EXECUTION_FAILED,
                    f"the provider's reply could not be read: {type(error).__name__}: {error}",
                    False,
                    {"provider": self.name, "operation": operation},
                )
            )
        if not terminal:
            if self._exited():
                raise await self._crashed(operation, "the Invoke stream ended without a terminal event")
            raise _violation(self.name, operation, "the Invoke stream ended without a result or error")
        return reply

    async def ensure_started(self) -> None:
        await self._ensure_started()

    async def recycle(self) -> None:
        """Kill the process now, without a grace (a call is waiting); the next invoke starts a fresh one."""
        await self._stop(grace=False)

    async def cleanup(self) -> None:
        await self._stop()

    async def _ensure_started(self) -> ToolProviderServiceStub:
        async with self._start_lock:
            if self._stub is not None and not self._exited():
                return self._stub
            await self._stop()
            try:
                schemas = await self._start()
            except ToolLoadError as error:
                raise ToolFailure(
                    ExecutionStatus.ERROR,
                    ToolErrorCategory.PROCESS_CRASHED,
                    f"provider {self.name!r} could not be restarted: {error}",
                    details={"provider": self.name},
                ) from error
            names = [schema.name for schema in schemas]
            if names != self._operations:
                await self._stop()
                raise ToolFailure(
                    ExecutionStatus.ERROR,
                    ToolErrorCategory.UNKNOWN,
                    f"provider {self.name!r} came back with different operations",
                    details={"before": self._operations, "after": names},
                )
            assert self._stub is not None
            return self._stub

    async def _start(self) -> list[OperationSchema]:
        env, view, socket_path = self._env, self._view, None
        if self._confinement is not None and self._confinement.sandboxed and view is not None:
            # No network in the sandbox: the provider listens on a unix socket in a directory of its own
            # (short: a socket's path is limited to 107 bytes), bound into its sandbox.
            directory = Path(tempfile.mkdtemp(prefix="tf-provider-"))
            self._confinement.own(directory)
            self._socket_dir = directory
            socket_path = str(directory / "provider.sock")
            env = {**env, PROVIDER_SOCKET_ENV: socket_path}
            view = dataclasses.replace(view, write=(*view.write, directory))
        # A token per process, on its stdin: never in argv (any user's ps shows it), nor in its
        # environment (its own commands could read it back from /proc).
        token = new_token()
        env = {**env, PROVIDER_TOKEN_FD_ENV: "0"}
        try:
            child = await ChildProcess.spawn(
                self._argv,
                cwd=self._cwd,
                env=env,
                limits=self._limits,
                confinement=self._confinement,
                view=view,
                stdin_data=token.encode("ascii") + b"\n",
            )
        except OSError as error:
            raise ToolLoadError(f"provider {self.name!r}: cannot start {self._argv[0]!r}: {error}") from error
        self._child = child
        try:
            handshake = await child.read_handshake(HANDSHAKE_DEADLINE_S)
            if handshake.protocol_version != PROVIDER_PROTOCOL_VERSION:
                raise ToolLoadError(
                    f"provider {self.name!r} speaks protocol version {handshake.protocol_version}; "
                    f"this runner speaks {PROVIDER_PROTOCOL_VERSION}"
                )
            if handshake.path is not None:
                if handshake.path != socket_path:
                    raise ToolLoadError(
                        f"provider {self.name!r} announced the unix socket {handshake.path!r}, "
                        f"not the one the runner gave it in {PROVIDER_SOCKET_ENV}"
                    )
                self._channel = grpclib.client.Channel(path=handshake.path)
            elif socket_path is not None:
                raise ToolLoadError(
                    f"provider {self.name!r} announced a tcp address, but it runs in the sandbox without "
                    f"network: it must listen on the unix socket named by {PROVIDER_SOCKET_ENV} "
                    "(tolokaforge.sdk.providers.serve_provider does; docs/protocol/tool-providers.md)"
                )
            else:
                self._channel = grpclib.client.Channel(handshake.host, handshake.port)
            stub = ToolProviderServiceStub(
                self._channel, timeout=_SETUP_RPC_TIMEOUT_S, metadata={"authorization": bearer(token)}
            )
            described = await stub.describe(DescribeRequest())
            if described.protocol_version != handshake.protocol_version:
                raise ToolLoadError(
                    f"provider {self.name!r}: Describe says protocol {described.protocol_version}, "
                    f"its handshake said {handshake.protocol_version}"
                )
            schema = await stub.get_schema(GetSchemaRequest())
            configured = await stub.configure(ConfigureRequest(config_json=self._config_json))
            if configured.error is not None and configured.error.category != ToolErrorCategory.UNSPECIFIED:
                raise ToolLoadError(f"provider {self.name!r} refused its config: {configured.error.message}")
        except HandshakeError as error:
            await self._stop()
            raise ToolLoadError(f"provider {self.name!r}: {error}") from error
        except (grpclib.GRPCError, grpclib.exceptions.StreamTerminatedError, OSError) as error:
            await self._stop()
            raise ToolLoadError(f"provider {self.name!r} failed during setup: {error}") from error
        except BaseException:
            await self._stop()
            raise
        self._stub = stub
        return list(schema.operations)

    def _exited(self) -> bool:
        return self._child is None or self._child.exited

    async def _crashed(self, operation: str, cause: str) -> ToolFailure:
        child = self._child
        # Give a dying process a moment to be reaped, so the report carries its exit code.
        if child is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(child.process.wait(), 0.5)
        details: dict[str, Any] = {"provider": self.name, "operation": operation, "cause": cause}
        if child is not None:
            details["exit_code"] = child.child.returncode
            details["stderr_tail"] = child.stderr_tail()[-2000:]
        await self._stop()
        return ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.PROCESS_CRASHED,
            f"the {self.name!r} provider process died during {operation!r} ({cause})",
            details=details,
        )

    async def _stop(self, *, grace: bool = True) -> None:
        channel, child = self._channel, self._child
        self._channel = self._stub = self._child = None
        if channel is not None:
            channel.close()
        if child is not None:
            await child.stop(grace=grace)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None


def _collect(reply: Reply, event: Any) -> bool:
    """Add one Invoke event to ``reply``; True when it was the terminal one."""
    if event.output_chunk is not None:
        reply.add_chunk(int(event.output_chunk.stream), bytes(event.output_chunk.data))
    elif event.progress is not None:
        reply.progress_events += 1
    elif event.exit_status is not None:
        reply.exit_code = event.exit_status.code
        reply.exit_signal = event.exit_status.signal
    elif event.result is not None:
        reply.output = event.result.output_json
        reply.text = event.result.text
        reply.partial_mutations = event.result.partial_mutations_json
        return True
    elif event.error is not None:
        reply.error = _reply_error(
            event.error.category, event.error.message, event.error.retryable, event.error.details_json
        )
        if not _REPORTED_OUTPUT.isdisjoint(reply.error.details):
            reply.forget_chunk_bytes()
        return True
    return False


_REPORTED_OUTPUT = frozenset({"stdout", "stderr"})
"""Error details that carry the operation's output themselves: its streamed copy is not kept twice."""


def _reply_error(category: ToolErrorCategory, message: str, retryable: bool, details_json: str) -> ReplyError:
    details: dict[str, Any] = {}
    if details_json:
        try:
            parsed: Any = json.loads(details_json)
        except json.JSONDecodeError:
            parsed = {"raw": details_json}
        details = cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {"value": parsed}
    return ReplyError(ToolErrorCategory(category), message, retryable, details)


def _grpc_error_reply(error: grpclib.GRPCError) -> Reply:
    """A live provider answering the RPC with a gRPC status instead of a ToolError event."""
    category = {
        Status.INVALID_ARGUMENT: ToolErrorCategory.INVALID_ARGUMENTS,
        Status.NOT_FOUND: ToolErrorCategory.NOT_FOUND,
        Status.PERMISSION_DENIED: ToolErrorCategory.PERMISSION_DENIED,
        Status.DEADLINE_EXCEEDED: ToolErrorCategory.TIMEOUT,
        Status.CANCELLED: ToolErrorCategory.CANCELLED,
    }.get(error.status, ToolErrorCategory.UNKNOWN)
    details = {"grpc_status": error.status.name, "grpc_message": error.message or ""}
    return Reply(error=ReplyError(category, f"gRPC {error.status.name}: {error.message}", False, details))


def _violation(name: str, operation: str, what: str) -> ToolFailure:
    return ToolFailure(
        ExecutionStatus.ERROR,
        ToolErrorCategory.UNKNOWN,
        f"provider {name!r} broke the protocol during {operation!r}: {what}",
        details={"protocol_violation": what, "provider": name, "operation": operation},
    )


def _describe_operation(provider: str, schema: OperationSchema) -> tuple[OperationSpec, ToolDescription]:
    where = f"provider {provider!r} operation {schema.name!r}"
    kind = _KINDS.get(schema.kind)
    if kind is None:
        raise ToolLoadError(f"{where} declares no kind (resource, data_source or interactive)")
    parameters = _schema(where, "input_schema_json", schema.input_schema_json) or {"type": "object"}
    output = _schema(where, "output_schema_json", schema.output_schema_json)
    concurrency = schema.concurrency
    spec = OperationSpec(
        name=schema.name,
        kind=kind,
        idempotent=schema.idempotent,
        output_check=SchemaCheck.of_schema(output) if output is not None else None,
        process_backed=schema.process_backed,
        streaming=schema.streaming,
        concurrency_safe=concurrency.safe if concurrency is not None else False,
        key_fields=tuple(concurrency.key_fields) if concurrency is not None else (),
    )
    description = ToolDescription(
        name=schema.name,
        description=schema.description,
        parameters=parameters,
        # ToolSource names where python code lives; for a provider it only records the origin.
        source=ToolSource(toolset=provider, module_path=provider, class_name=schema.name),
        category="read" if kind == "data_source" else "write",
        timeout_s=schema.default_timeout_seconds if schema.default_timeout_seconds else None,
    )
    return spec, description


def _schema(where: str, field_name: str, text: str) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value: Any = json.loads(text)
        Draft202012Validator.check_schema(value)
    except (json.JSONDecodeError, SchemaError) as error:
        raise ToolLoadError(f"{where}: {field_name} is not a JSON Schema: {error}") from error
    if not isinstance(value, dict):
        raise ToolLoadError(f"{where}: {field_name} must be a JSON object")
    return dict(value)  # pyright: ignore[reportUnknownArgumentType]
