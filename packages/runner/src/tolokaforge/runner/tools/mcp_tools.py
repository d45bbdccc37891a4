"""MCP servers over stdio, one per trial, through the official ``mcp`` SDK client.

The SDK's transport and session are anyio context managers that must be entered and left by one
task, while calls arrive from many RPC handlers; so one background task per server owns them and
the calls use the session it publishes. The server keeps its tables in the DB service: it gets
``TOLOKAFORGE_DB_URL`` and ``TOLOKAFORGE_TRIAL_ID`` and the runner reloads its mirror after a call
that moved the store's version (``writes_state``). Its stderr goes to a log file, never to a pipe
nobody reads, so a server that logs on every call cannot block.

A server that keeps its tables in its own process instead (tolokaforge.core.tools_interface) serves
the hidden state tools ``_tolokaforge_get_state_`` / ``_tolokaforge_set_state_``. They are never
offered to the model: the runner sets the trial's state through them (:meth:`McpSource.push_state`,
after start, restart, reset and restore) and, after every call, reads the server's tables back and
hands them to ``on_state``, which commits the difference to the store (state_sync.py).

Outcomes: ``isError`` -> execution_failed; a JSON-RPC error -> the fitting category; the connection
closing under a call -> process_crashed (kernel-synthesized).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import mcp_types
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.models import ToolDescription, ToolSource
from tolokaforge.core.tools_interface import GET_STATE_TOOL, SET_STATE_TOOL, STATE_TOOLS

from ..errors import ToolFailure, ToolLoadError
from .remote import CallInfo, OperationSpec, Reply, ReplyError

__all__ = ["McpSource"]

STARTUP_DEADLINE_S = 20.0

_JSONRPC_CATEGORIES = {
    mcp_types.INVALID_PARAMS: ToolErrorCategory.INVALID_ARGUMENTS,
    mcp_types.METHOD_NOT_FOUND: ToolErrorCategory.NOT_FOUND,
    mcp_types.REQUEST_TIMEOUT: ToolErrorCategory.TIMEOUT,
}


class McpSource:
    """One stdio MCP server for one trial (restarted on demand after a crash or a kill)."""

    writes_state = True

    def __init__(
        self, name: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path
    ) -> None:
        self.name = name
        self._params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=dict(env), cwd=cwd)
        self._log_path = log_path
        self._session: ClientSession | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        self._tool_names: list[str] = []
        self.syncs_state = False
        """The server keeps its tables in-process and serves the hidden state tools."""
        self.on_state: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        """Receives the server's tables after every call (set by the registry for a syncing server)."""
        self.current_state: Callable[[], Mapping[str, Any]] | None = None
        """The trial's tables, pushed to a syncing server again when it restarts."""

    @property
    def identity(self) -> str:
        return "mcp:" + " ".join([self._params.command, *self._params.args])

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
        await self._state_call(session, SET_STATE_TOOL, {"state_json": json.dumps(tables, default=str)})

    async def pull_state(self) -> dict[str, Any]:
        session = await self._ensure_started()
        text = await self._state_call(session, GET_STATE_TOOL, {})
        try:
            tables = json.loads(text)
        except ValueError as error:
            raise self._state_failure(f"its state is not JSON: {error}") from error
        if not isinstance(tables, dict):
            raise self._state_failure("its state is not a JSON object of tables")
        return cast(dict[str, Any], tables)

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

    async def _sync_back(self) -> None:
        if self.syncs_state and self.on_state is not None:
            await self.on_state(await self.pull_state())

    async def invoke(self, operation: str, arguments: Mapping[str, Any], call: CallInfo) -> Reply:
        session = await self._ensure_started()
        try:
            result = await session.call_tool(operation, dict(arguments))
        except MCPError as error:
            if error.code == mcp_types.CONNECTION_CLOSED:
                raise await self._crashed(operation, error.message) from error
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
        # Whatever the tool answered, it may have changed the server's tables: read them back first.
        await self._sync_back()
        text = _render(result.content)
        if result.is_error:
            return Reply(error=ReplyError(ToolErrorCategory.EXECUTION_FAILED, text or "the tool failed"))
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
            if self._session is not None and self._task is not None and not self._task.done():
                return self._session
            await self._shutdown()
            try:
                session = await self._start()
                if self.syncs_state and self.current_state is not None:
                    # A restarted server lost its tables: give it the trial's again before any call.
                    await self._state_call(
                        session,
                        SET_STATE_TOOL,
                        {"state_json": json.dumps(dict(self.current_state()), default=str)},
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
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[ClientSession] = loop.create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._serve(ready, self._stop), name=f"mcp-{self.name}")
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

    async def _serve(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        """Own the transport and session for the server's whole life (one task enters and leaves them)."""
        try:
            with self._log_path.open("ab") as errlog:
                async with (
                    stdio_client(self._params, errlog=errlog) as (read, write),  # pyright: ignore[reportArgumentType]
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    ready.set_result(session)
                    await stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else RuntimeError(repr(error)))
            if isinstance(error, asyncio.CancelledError):
                raise

    async def _crashed(self, operation: str, cause: str) -> ToolFailure:
        await self._shutdown()
        return ToolFailure(
            ExecutionStatus.ERROR,
            ToolErrorCategory.PROCESS_CRASHED,
            f"the MCP server {self.name!r} died during {operation!r} ({cause})",
            details={"server": self.name, "operation": operation, "cause": cause, "log": str(self._log_path)},
        )

    async def _shutdown(self) -> None:
        task, stop = self._task, self._stop
        self._session = self._task = self._stop = None
        if task is None or stop is None:
            return
        stop.set()
        # The SDK's shutdown is bounded (stdin close, SIGTERM, SIGKILL); cancel only if it overruns.
        try:
            await asyncio.wait_for(asyncio.shield(task), 10.0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        except Exception:  # the server's own failure was already reported where it happened
            pass


def _render(content: Sequence[Any]) -> str:
    parts: list[str] = []
    for block in content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(json.dumps(block.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return "\n".join(parts)


def _describe_tool(server: str, tool: mcp_types.Tool) -> tuple[OperationSpec, ToolDescription]:
    validator: Draft202012Validator | None = None
    if tool.output_schema is not None:
        try:
            Draft202012Validator.check_schema(tool.output_schema)
        except SchemaError as error:
            raise ToolLoadError(
                f"MCP tool {tool.name!r}: outputSchema is not a JSON Schema: {error.message}"
            ) from error
        validator = Draft202012Validator(tool.output_schema)
    hints = tool.annotations
    read_only = bool(hints is not None and hints.read_only_hint)
    spec = OperationSpec(
        name=tool.name,
        # MCP has no kinds; the read-only hint is the closest: such a tool is a data source.
        kind="data_source" if read_only else "resource",
        idempotent=bool(hints is not None and hints.idempotent_hint),
        output_validator=validator,
    )
    description = ToolDescription(
        name=tool.name,
        description=tool.description or "",
        parameters=dict(tool.input_schema),
        source=ToolSource(toolset=server, module_path=server, class_name=tool.name),
        category="read" if read_only else "write",
    )
    return spec, description
