"""The fs provider's ToolProviderService: schema, and read / write / list confined to the workspace."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import stat
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from tolokaforge.contracts.tool import (
    ConcurrencySpec,
    InvokeRequest,
    InvokeResponse,
    InvokeResult,
    OperationSchema,
    RiskClass,
    ToolError,
    ToolErrorCategory,
    ToolKind,
)
from tolokaforge.core.beneath import NotARegularFile, makedirs_beneath, open_beneath, read_beneath
from tolokaforge.core.providers import PROVIDER_PROTOCOL_VERSION, ProviderBase

from .paths import Refusal, WorkspacePin, classify, open_workspace

__all__ = ["FsProvider"]

_MAX_READ_BYTES = 1024 * 1024


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_PATH = {"type": "string", "description": "A path relative to the workspace."}
_STR = {"type": "string"}
_ENTRY = _object({"name": _STR, "type": {"enum": ["file", "dir", "other"]}}, ["name", "type"])


def _operation(
    name: str,
    description: str,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    *,
    mutating: bool,
    path_field: str = "path",
) -> OperationSchema:
    return OperationSchema(
        name=name,
        description=description,
        input_schema_json=json.dumps(inputs),
        output_schema_json=json.dumps(outputs),
        kind=ToolKind.RESOURCE if mutating else ToolKind.DATA_SOURCE,
        risk=RiskClass.MUTATING if mutating else RiskClass.READ_ONLY,
        # Reading is always repeatable; writing the same content twice leaves the same file.
        idempotent=True,
        # Two writes to one path must not interleave; different paths may run together.
        concurrency=ConcurrencySpec(safe=True, key_fields=[path_field] if mutating else []),
        default_timeout_seconds=10.0,
    )


_WORKSPACE_OPERATIONS = [
    _operation(
        "read",
        "Read a text file of the workspace.",
        _object({"path": _PATH}, ["path"]),
        _object({"path": _STR, "content": _STR}, ["path", "content"]),
        mutating=False,
    ),
    _operation(
        "write",
        "Write a text file of the workspace (created or replaced), creating its folders.",
        _object({"path": _PATH, "content": _STR}, ["path", "content"]),
        _object({"path": _STR, "bytes_written": {"type": "integer"}}, ["path", "bytes_written"]),
        mutating=True,
    ),
    _operation(
        "list",
        "List a folder of the workspace (the workspace itself by default).",
        _object({"path": _PATH}, []),
        _object({"path": _STR, "entries": {"type": "array", "items": _ENTRY}}, ["path", "entries"]),
        mutating=False,
    ),
]


# The same three operations under the names and argument names packs in the public Tolokaforge
# style enable as built-in tools (read_file / write_file / list_dir).
_FILE_PATH = {"type": "string", "description": "A path relative to the workspace."}
OPERATIONS = [
    *_WORKSPACE_OPERATIONS,
    _operation(
        "read_file",
        "Read a text file of the workspace.",
        _object({"file_path": _FILE_PATH}, ["file_path"]),
        _object({"path": _STR, "content": _STR}, ["path", "content"]),
        mutating=False,
    ),
    _operation(
        "write_file",
        "Write a text file of the workspace (created or replaced), creating its folders.",
        _object({"file_path": _FILE_PATH, "content": _STR}, ["file_path", "content"]),
        _object({"path": _STR, "bytes_written": {"type": "integer"}}, ["path", "bytes_written"]),
        mutating=True,
        path_field="file_path",
    ),
    _operation(
        "list_dir",
        "List a folder of the workspace (the workspace itself by default).",
        _object({"dir_path": _FILE_PATH}, []),
        _object({"path": _STR, "entries": {"type": "array", "items": _ENTRY}}, ["path", "entries"]),
        mutating=False,
    ),
]
# Which argument names the path, per operation; the public names are aliases of read / write / list.
_PATH_FIELD = {"read_file": "file_path", "write_file": "file_path", "list_dir": "dir_path"}
_ALIAS = {"read_file": "read", "write_file": "write", "list_dir": "list"}

# The argument names each operation declares (its input schema says additionalProperties: false).
_DECLARED = {op.name: frozenset(json.loads(op.input_schema_json)["properties"]) for op in OPERATIONS}


_Handler = Callable[[int, dict[str, Any], str], dict[str, Any]]
"""An operation: (the workspace's descriptor, the arguments, the path) -> its output."""


class FsProvider(ProviderBase):
    name = "fs"
    version = "0.1.0"
    description = "Read, write and list files inside the trial's workspace."
    operations = OPERATIONS

    def __init__(self, protocol_version: int = PROVIDER_PROTOCOL_VERSION) -> None:
        super().__init__(protocol_version)
        self._workspace = WorkspacePin()
        self._handlers: dict[str, _Handler] = {
            "read": _read,
            "write": _write,
            "list": _list,
        }

    async def invoke(self, message: InvokeRequest) -> AsyncIterator[InvokeResponse]:
        try:
            handler = self._handlers.get(_ALIAS.get(message.operation, message.operation))
            if handler is None:
                raise Refusal(ToolErrorCategory.NOT_FOUND, f"no operation {message.operation!r}")
            arguments = _arguments(message.arguments_json, _DECLARED[message.operation])
            field = _PATH_FIELD.get(message.operation)
            if field is not None and field in arguments:
                arguments["path"] = arguments.pop(field)
            workspace = message.call_context.working_directory if message.call_context else ""
            path = arguments.get("path", ".")
            claimed = self._workspace.claim(workspace)
            # File system calls block: they run on a thread, which owns every descriptor it opens
            # (a cancelled call cannot close one under it).
            output = await asyncio.to_thread(_in_workspace, claimed, handler, arguments, path)
        except Refusal as failure:
            yield InvokeResponse(error=ToolError(category=failure.category, message=failure.message))
            return
        yield InvokeResponse(result=InvokeResult(output_json=json.dumps(output)))


def _arguments(text: str, declared: frozenset[str]) -> dict[str, Any]:
    try:
        value: Any = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise Refusal(ToolErrorCategory.INVALID_ARGUMENTS, f"arguments are not JSON: {error}") from error
    if not isinstance(value, dict):
        raise Refusal(ToolErrorCategory.INVALID_ARGUMENTS, "arguments must be a JSON object")
    arguments = cast(dict[str, Any], value)
    undeclared = sorted(set(arguments) - declared)
    if undeclared:
        raise Refusal(
            ToolErrorCategory.INVALID_ARGUMENTS,
            f"unknown argument(s) {', '.join(map(repr, undeclared))}; this operation takes {', '.join(sorted(declared))}",
        )
    for key in ("path", "file_path", "dir_path", "content"):
        if key in arguments and not isinstance(arguments[key], str):
            raise Refusal(ToolErrorCategory.INVALID_ARGUMENTS, f"{key!r} must be a string")
    return arguments


def _in_workspace(workspace: str, handler: _Handler, arguments: dict[str, Any], path: str) -> dict[str, Any]:
    root = open_workspace(workspace)
    try:
        return handler(root, arguments, path)
    finally:
        os.close(root)


def _read(root: int, arguments: dict[str, Any], path: str) -> dict[str, Any]:
    if "path" not in arguments:
        raise Refusal(ToolErrorCategory.INVALID_ARGUMENTS, "'path' is required")
    try:
        data, truncated = read_beneath(root, path, _MAX_READ_BYTES)
    except (OSError, ValueError) as error:
        raise classify(path, error) from error
    if truncated:
        raise Refusal(ToolErrorCategory.EXECUTION_FAILED, f"{path!r} is larger than {_MAX_READ_BYTES} bytes")
    return {"path": path, "content": data.decode("utf-8", errors="replace")}


def _write(root: int, arguments: dict[str, Any], path: str) -> dict[str, Any]:
    if "path" not in arguments or "content" not in arguments:
        raise Refusal(ToolErrorCategory.INVALID_ARGUMENTS, "'path' and 'content' are required")
    data = str(arguments["content"]).encode("utf-8")
    folder = path.rpartition("/")[0]
    try:
        makedirs_beneath(root, folder)
        # O_NONBLOCK: a FIFO without a reader fails at once instead of hanging the call.
        fd = open_beneath(root, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotARegularFile(errno.EPERM, "is not a regular file", path)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except (OSError, ValueError) as error:
        raise classify(path, error) from error
    return {"path": path, "bytes_written": len(data)}


def _list(root: int, arguments: dict[str, Any], path: str) -> dict[str, Any]:
    try:
        fd = open_beneath(root, path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as listing:
                # Links are listed, never followed: their type is "other".
                entries = [
                    {"name": entry.name, "type": _entry_type(entry)}
                    for entry in sorted(listing, key=lambda entry: entry.name)
                ]
        finally:
            os.close(fd)
    except (OSError, ValueError) as error:
        raise classify(path, error) from error
    return {"path": path, "entries": entries}


def _entry_type(entry: os.DirEntry[str]) -> str:
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"
