"""Authoring tools once for two hosts: a real MCP stdio server, and the python-tool ``TOOLS`` mapping.

A pack's ``mcp_server.py`` in this style::

    from tolokaforge.sdk.tools_interface import ToolError, create_server

    mcp, registry, TOOLS = create_server(__file__, "shelf")

    @registry.tool("Look a book up by ISBN.")
    def find_book(data: dict, isbn: str) -> dict:
        ...   # reads and changes ``data``, the trial's tables; raise ToolError for a business error

    if __name__ == "__main__":
        mcp.run(transport="stdio")

Each decorated ``f(data, **args)`` is both an MCP tool (its input schema is the signature without
``data``) and a class in ``TOOLS`` with ``get_info()`` and ``invoke(data, **args)``, so the same file
also loads as python tools (``tools.agent.python``). Arguments that arrive as plain dicts are turned
into the pydantic models the signature annotates. A ``ToolError`` becomes the result
``{"error": message, "details": [...]}`` on both paths.

The server keeps its tables in its own process (``data``). So that the store, GetState and the
grader see exactly what its tools did, it also serves two hidden tools the runner calls and never
offers to the model: ``_tolokaforge_get_state_`` (the tables as JSON) and ``_tolokaforge_set_state_``
(replace them). On start the server loads ``state_file`` beside the script when there is one; the
runner then sets the trial's state before the first call and after every reset or restore.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, cast, get_args, get_origin, get_type_hints

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from pydantic import BaseModel

__all__ = [
    "GET_STATE_TOOL",
    "SET_STATE_TOOL",
    "STATE_TOOLS",
    "DomainToolRegistry",
    "ToolError",
    "create_server",
    "setup_task_server",
]

GET_STATE_TOOL = "_tolokaforge_get_state_"
SET_STATE_TOOL = "_tolokaforge_set_state_"
STATE_TOOLS = frozenset({GET_STATE_TOOL, SET_STATE_TOOL})
"""The hidden state tools: the runner uses them and never offers them to the model."""

State = dict[str, Any]
ToolFunction = Callable[..., Any]


class ToolError(Exception):
    """A business error inside a tool: the call answers ``{"error": message, "details": details}``."""

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details: list[str] = list(details or [])

    @classmethod
    def from_exc(cls, message: str, exc: BaseException) -> ToolError:
        return cls(message, [str(exc)])

    def to_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"error": str(self)}
        if self.details:
            result["details"] = self.details
        return result


def _strip_annotated(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _model_of(hint: Any) -> type[BaseModel] | None:
    hint = _strip_annotated(hint)
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


def _coerce(given: object, hint: Any) -> Any:
    """A dict (or list of dicts) where the signature wants a pydantic model becomes that model."""
    value: Any = given
    hint = _strip_annotated(hint)
    model = _model_of(hint)
    if model is not None and isinstance(value, dict):
        return model.model_validate(value)
    if get_origin(hint) is list and isinstance(value, list):
        args = get_args(hint)
        item = _model_of(args[0]) if args else None
        if item is not None:
            items: list[Any] = [
                item.model_validate(v) if isinstance(v, dict) else v for v in cast(list[Any], value)
            ]
            return items
    return given


class DomainToolRegistry:
    """One decorator, two registrations: the MCP server's tool and the ``TOOLS`` class."""

    def __init__(self, mcp: MCPServer[Any], state: Callable[[], State]) -> None:
        self.TOOLS: dict[str, type] = {}
        self._mcp = mcp
        self._state = state
        self._add_state_tools()

    def _add_state_tools(self) -> None:
        state = self._state

        def get_state() -> str:
            return json.dumps(state())

        def set_state(state_json: str) -> str:
            replacement = json.loads(state_json)
            if not isinstance(replacement, dict):
                raise ToolError("the state must be a JSON object of tables")
            current = state()
            current.clear()
            current.update(cast(State, replacement))
            return json.dumps({"tables": sorted(current)})

        self._mcp.add_tool(
            get_state, name=GET_STATE_TOOL, description="Internal: the server's tables as JSON."
        )
        self._mcp.add_tool(
            set_state, name=SET_STATE_TOOL, description="Internal: replace the server's tables."
        )

    def tool(self, description: str) -> Callable[[ToolFunction], ToolFunction]:
        """Register ``f(data, **args)`` under its own name; ``description`` is what the model reads."""

        def register(function: ToolFunction) -> ToolFunction:
            name = function.__name__
            signature = inspect.signature(function)
            if next(iter(signature.parameters), None) != "data":
                raise TypeError(f"tool {name!r}: the first parameter must be 'data' (the trial's tables)")
            hints = get_type_hints(function, include_extras=True)
            state = self._state

            def call(data: State, arguments: dict[str, Any]) -> Any:
                coerced = {key: _coerce(value, hints.get(key)) for key, value in arguments.items()}
                try:
                    return function(data, **coerced)
                except ToolError as error:
                    return error.to_result()

            def served(**arguments: Any) -> str:
                # Text, as a python tool's result is shown: the model reads the same thing on both paths.
                result = call(state(), arguments)
                return result if isinstance(result, str) else json.dumps(result, default=str)

            served.__name__ = name
            served.__doc__ = function.__doc__
            # Annotations resolved here, in the pack's module: the SDK would resolve strings in this one.
            served.__signature__ = signature.replace(  # pyright: ignore[reportFunctionMemberAccess]
                parameters=[
                    p.replace(annotation=hints.get(p.name, p.annotation))
                    for p in signature.parameters.values()
                    if p.name != "data"
                ],
                return_annotation=str,
            )
            served.__annotations__ = {k: v for k, v in hints.items() if k not in ("data", "return")} | {
                "return": str
            }
            parameters = Tool.from_function(served, name=name, description=description).parameters
            self._mcp.add_tool(served, name=name, description=description, structured_output=False)
            self.TOOLS[name] = _tool_class(function, description, parameters, call)
            return function

        return register


def _tool_class(
    function: ToolFunction,
    description: str,
    parameters: dict[str, Any],
    call: Callable[[State, dict[str, Any]], Any],
) -> type:
    """The python-tool face of a registered function: ``get_info()`` and ``invoke(data, **args)``."""
    info = {
        "type": "function",
        "function": {"name": function.__name__, "description": description, "parameters": parameters},
    }

    def get_info() -> dict[str, Any]:
        return json.loads(json.dumps(info))

    def invoke(data: State, **arguments: Any) -> Any:
        return call(data, arguments)

    cls = type(
        function.__name__,
        (),
        {"get_info": staticmethod(get_info), "invoke": staticmethod(invoke), "__doc__": description},
    )
    # The loader checks a tool class belongs to the pack: it does, through the function it wraps.
    cls.__module__ = function.__module__
    return cls


def setup_task_server(caller_file: str) -> type[DomainToolRegistry]:
    """Put the script's folder first on ``sys.path`` so ``tools/`` beside it imports by its plain name."""
    folder = str(Path(caller_file).resolve().parent)
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    # Packs written against a path-loaded copy import this module as ``core.tools_interface``.
    sys.modules.setdefault("core.tools_interface", sys.modules[__name__])
    return DomainToolRegistry


def create_server(
    caller_file: str, server_name: str, state_file: str = "initial_state.json"
) -> tuple[MCPServer[Any], DomainToolRegistry, dict[str, type]]:
    """``(mcp, registry, TOOLS)`` for an ``mcp_server.py``: the server, its decorator, its tool classes."""
    setup_task_server(caller_file)
    tables: State = {}
    seed = Path(caller_file).resolve().parent / state_file

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncGenerator[None]:
        tables.clear()
        if seed.is_file():
            tables.update(cast(State, json.loads(seed.read_text(encoding="utf-8"))))
        yield

    mcp: MCPServer[Any] = MCPServer(server_name, lifespan=lifespan)
    registry = DomainToolRegistry(mcp, lambda: tables)
    return mcp, registry, registry.TOOLS
