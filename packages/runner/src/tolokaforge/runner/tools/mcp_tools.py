"""MCP servers over stdio, one per trial, through the official ``mcp`` SDK's client session.

The server runs under the runner's supervisor (mcp_stdio.py): killed at once, as a whole process
tree, when a call overstays its budget, when it crashed, and at CleanupTrial. The SDK's session is
an anyio context manager that must be entered and left by one task, while calls arrive from many RPC
handlers; so one background task per server owns it and the calls use the session it publishes. The
server keeps its tables in the DB service: it gets ``TOLOKAFORGE_DB_URL`` and ``TOLOKAFORGE_TRIAL_ID``
and the executor reloads its mirror after a call that moved the store's version (``writes_state``),
or puts the pre-call state back after a call that failed. Its stderr goes to a log file, never to a
pipe nobody reads, so a server that logs on every call cannot block.

A server that keeps its tables in its own process instead (tolokaforge.sdk.tools_interface) serves
the hidden state tools ``_tolokaforge_get_state_`` / ``_tolokaforge_set_state_``. They are never
offered to the model: the runner sets the trial's state through them (:meth:`McpSource.push_state`,
after start, restart, reset, restore and a failed call), and after a successful call reads the
server's tables back for the executor to commit (:meth:`McpSource.take_state`, state_sync.py).

Outcomes: ``isError`` -> execution_failed; a JSON-RPC error -> the fitting category; a reply the
runner cannot read (invalid UTF-8, a lone surrogate) -> execution_failed; the connection closing
under a call -> process_crashed (kernel-synthesized), unless the server was gone before it read the
call: then the call never ran, and the kernel sends it again to a fresh server (CallNotDelivered).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.models import ToolDescription, ToolSource
from tolokaforge.core.value_tables import present
from tolokaforge.sdk.tools_interface import GET_STATE_TOOL, SET_STATE_TOOL, STATE_TOOLS

from ..errors import ToolFailure, ToolLoadError
from ..process.confinement import Launch
from .mcp_stdio import UNREADABLE_REPLY, StdioServer
from .remote import CallInfo, CallNotDelivered, OperationSpec, Reply, ReplyError
from .schema_check import SchemaCheck

__all__ = ["McpSource"]

STARTUP_DEADLINE_S = 20.0
_SHUTDOWN_DEADLINE_S = 5.0
"""How long a killed server's session may take to wind down before its task is cancelled."""

_JSONRPC_CATEGORIES = {
    mcp_types.INVALID_PARAMS: ToolErrorCategory.INVALID_ARGUMENTS,
    mcp_types.METHOD_NOT_FOUND: ToolErrorCategory.NOT_FOUND,
    mcp_types.REQUEST_TIMEOUT: ToolErrorCategory.TIMEOUT,
}


class McpSource:
    """One stdio MCP server for one trial (restarted on demand after a crash, a kill or an exit)."""

    writes_state = True

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        log_path: Path,
        launch: Launch | None = None,
    ) -> None:
        self.name = name
        self._argv = list(argv)
        self._launch = launch or Launch(tuple(argv))
        """How the server is started (in the sandbox); ``argv`` is what the pack asked for."""
        self._cwd = cwd
        self._env = dict(env)
        self._log_path = log_path
        self._server: StdioServer | None = None
        self._session: ClientSession | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        self._tool_names: list[str] = []
        self._pulled: dict[str, Any] | None = None
        self.syncs_state = False
        """The server keeps its tables in-process and serves the hidden state tools."""
        self.current_state: Callable[[], Mapping[str, Any]] | None = None
        """The trial's tables, pushed to a syncing server again when it restarts."""

    @property
    def identity(self) -> str:
        return "mcp:" + " ".join(self._argv)

    @property
    def pid(self) -> int | None:
        return self._server.pid if self._server is not None else None

    @property
    def running(self) -> bool:
        """Whether the server is up (one that exited is restarted before the next call)."""
        return (
            self._server is not None
            and self._server.alive
            and self._task is not None
            and not self._task.done()
        )

    async def setup(self) -> list[tuple[OperationSpec, ToolDescription]]:
        session = await self._start()
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(
                params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        names = {tool.name for tool in tools}
        self.syncs_state = names >= STATE_TOOLS
        offered = [tool for tool in tools if tool.name not in STATE_TOOLS]
        self._tool_names = [tool.name for tool in offered]
        return [_describe_tool(self.name, tool) for tool in offered]

    async def push_state(self, tables: Mapping[str, Any]) -> None:
        """Replace a syncing server's tables with the trial's (a no-op for a server that does not sync)."""
        if not self.syncs_state:
            return
        session = await self._ensure_started()
        await self._state_call(
            session, SET_STATE_TOOL, {"state_json": json.dumps(present(tables), default=str)}
        )

    def take_state(self) -> dict[str, Any] | None:
        """A syncing server's tables after the last call, when it succeeded (once; None otherwise)."""
        pulled, self._pulled = self._pulled, None
        return pulled

    async def _state_call(self, session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
        try:
            result = await session.call_tool(tool, arguments)
        except MCPError as error:
            if error.code == mcp_types.CONNECTION_CLOSED:
                raise await self._crashed(tool, error.message) from error
            raise self._state_failure(f"{tool} answered MCP error {error.code}: {error.message}") from error
        text = _render(result.content)
        if result.is_error:
            raise self._state_failure(f"{tool} failed: {text}")
        return text

    def _state_failure(self, message: str) -> ToolFailure:
        return ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.UNKNOWN,
            f"MCP server {self.name!r} could not sync the trial's state: {message}",
            details={"server": self.name},
        )

    async def invoke(self, operation: str, arguments: Mapping[str, Any], call: CallInfo) -> Reply:
        self._pulled = None
        session = await self._ensure_started()
        server = self._server
        if server is not None:
            server.begin_call()
        try:
            result = await session.call_tool(operation, dict(arguments))
        except MCPError as error:
            if error.code == mcp_types.CONNECTION_CLOSED:
                if server is not None and server.undelivered():
                    await self._shutdown()
                    raise CallNotDelivered(
                        f"the MCP server {self.name!r} was gone before it read the call to {operation!r}"
                    ) from error
                raise await self._crashed(operation, error.message) from error
            if error.code == UNREADABLE_REPLY:
                return Reply(
                    error=ReplyError(
                        ToolErrorCategory.EXECUTION_FAILED, error.message, False, {"server": self.name}
                    )
                )
            category = _JSONRPC_CATEGORIES.get(error.code, ToolErrorCategory.UNKNOWN)
            details = {"jsonrpc_code": error.code, "jsonrpc_message": error.message, "data": error.data}
            return Reply(
                error=ReplyError(category, f"MCP error {error.code}: {error.message}", False, details)
            )
        except RuntimeError as error:
            # The SDK checks structured content against the tool's outputSchema and raises this.
            raise ToolFailure(
                ExecutionStatus.ERROR,
                ToolErrorCategory.UNKNOWN,
                f"MCP server {self.name!r} broke the protocol during {operation!r}: {error}",
                details={"protocol_violation": str(error), "server": self.name, "operation": operation},
            ) from error
        text = _render(result.content)
        if result.is_error:
            # Whatever the failed call changed in the server's tables, the executor puts the trial's back.
            return Reply(error=ReplyError(ToolErrorCategory.EXECUTION_FAILED, text or "the tool failed"))
        if self.syncs_state:
            # From the very server that ran the call: a restarted one would hold the pre-call tables.
            if self._session is not session or not self.running:
                raise await self._crashed(operation, "it exited before its tables could be read back")
            self._pulled = _tables(await self._state_call(session, GET_STATE_TOOL, {}), self._state_failure)
        output = json.dumps(result.structured_content) if result.structured_content is not None else None
        return Reply(output=output, text=text)

    async def ensure_started(self) -> None:
        await self._ensure_started()

    async def recycle(self) -> None:
        await self._shutdown()

    async def cleanup(self) -> None:
        await self._shutdown()

    async def _ensure_started(self) -> ClientSession:
        async with self._start_lock:
            if self._session is not None and self.running:
                return self._session
            await self._shutdown()
            try:
                session = await self._start()
                if self.syncs_state and self.current_state is not None:
                    # A restarted server lost its tables: give it the trial's again before any call.
                    await self._state_call(
                        session,
                        SET_STATE_TOOL,
                        {"state_json": json.dumps(present(self.current_state()), default=str)},
                    )
                return session
            except ToolLoadError as error:
                raise ToolFailure(
                    ExecutionStatus.ERROR,
                    ToolErrorCategory.PROCESS_CRASHED,
                    f"MCP server {self.name!r} could not be restarted: {error}",
                    details={"server": self.name},
                ) from error

    async def _start(self) -> ClientSession:
        try:
            server = await StdioServer.spawn(
                self._launch, cwd=self._cwd, env=self._env, log_path=self._log_path
            )
        except OSError as error:
            raise ToolLoadError(f"MCP server {self.name!r} could not be started: {error}") from error
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[ClientSession] = loop.create_future()
        self._server = server
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._serve(server, ready, self._stop), name=f"mcp-{self.name}")
        try:
            session = await asyncio.wait_for(asyncio.shield(ready), STARTUP_DEADLINE_S)
        except TimeoutError as error:
            await self._shutdown()
            raise ToolLoadError(
                f"MCP server {self.name!r} did not initialise within {STARTUP_DEADLINE_S:g}s"
            ) from error
        except Exception as error:
            await self._shutdown()
            raise ToolLoadError(f"MCP server {self.name!r} failed to start: {error}") from error
        self._session = session
        return session

    async def _serve(
        self, server: StdioServer, ready: asyncio.Future[ClientSession], stop: asyncio.Event
    ) -> None:
        """Own the pipes and the session for the server's whole life (one task enters and leaves them)."""
        try:
            async with anyio.create_task_group() as pipes:
                pipes.start_soon(server.read_loop)
                pipes.start_soon(server.write_loop)
                try:
                    async with ClientSession(server.read_stream, server.write_stream) as session:
                        await session.initialize()
                        ready.set_result(session)
                        await stop.wait()
                finally:
                    server.kill()
                    pipes.cancel_scope.cancel()
        except BaseException as error:
            if not ready.done():
                cause = _unwrap(error)
                ready.set_exception(cause if isinstance(cause, Exception) else RuntimeError(repr(cause)))
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            await server.close()

    async def _crashed(self, operation: str, cause: str) -> ToolFailure:
        code = self._server.child.returncode if self._server is not None else None
        await self._shutdown()
        return ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.PROCESS_CRASHED,
            f"the MCP server {self.name!r} died during {operation!r} ({cause})",
            details={
                "server": self.name,
                "operation": operation,
                "cause": cause,
                "log": str(self._log_path),
                "server_exit_code": code,
            },
        )

    async def _shutdown(self) -> None:
        """Kill the server's process tree at once (no grace: a call may be waiting), then wind down."""
        server, task, stop = self._server, self._task, self._stop
        self._server = self._session = self._task = self._stop = None
        if server is not None:
            server.kill()
        if task is None or stop is None:
            return
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), _SHUTDOWN_DEADLINE_S)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        except Exception:  # the server's own failure was already reported where it happened
            pass


def _unwrap(error: BaseException) -> BaseException:
    """The one failure inside task-group wrapping, for a readable start-up error."""
    found: BaseException = error
    while True:
        inner: Any = getattr(found, "exceptions", None)  # a BaseExceptionGroup's members
        if not isinstance(inner, tuple) or len(cast(tuple[Any, ...], inner)) != 1:
            return found
        found = cast(BaseException, inner[0])


def _tables(text: str, failure: Callable[[str], ToolFailure]) -> dict[str, Any]:
    try:
        tables = json.loads(text)
    except ValueError as error:
        raise failure(f"its state is not JSON: {error}") from error
    if not isinstance(tables, dict):
        raise failure("its state is not a JSON object of tables")
    return cast(dict[str, Any], tables)


def _render(content: Sequence[Any]) -> str:
    parts: list[str] = []
    for block in content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(json.dumps(block.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return "\n".join(parts)


def _describe_tool(server: str, tool: mcp_types.Tool) -> tuple[OperationSpec, ToolDescription]:
    validator: SchemaCheck | None = None
    if tool.output_schema is not None:
        try:
            Draft202012Validator.check_schema(tool.output_schema)
        except SchemaError as error:
            raise ToolLoadError(
                f"MCP tool {tool.name!r}: outputSchema is not a JSON Schema: {error.message}"
            ) from error
        validator = SchemaCheck.of_schema(tool.output_schema)
    hints = tool.annotations
    read_only = bool(hints is not None and hints.read_only_hint)
    spec = OperationSpec(
        name=tool.name,
        # MCP has no kinds; the read-only hint is the closest: such a tool is a data source.
        kind="data_source" if read_only else "resource",
        idempotent=bool(hints is not None and hints.idempotent_hint),
        output_check=validator,
    )
    description = ToolDescription(
        name=tool.name,
        description=tool.description or "",
        parameters=dict(tool.input_schema),
        source=ToolSource(toolset=server, module_path=server, class_name=tool.name),
        category="read" if read_only else "write",
    )
    return spec, description
