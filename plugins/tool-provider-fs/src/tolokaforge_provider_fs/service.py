"""The fs provider's ToolProviderService: schema, and read / write / list confined to the workspace."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
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
from tolokaforge.core.providers import PROVIDER_PROTOCOL_VERSION, ProviderBase

from .paths import Escape, confine

__all__ = ["FsProvider"]

_MAX_READ_BYTES = 1024 * 1024


class _Failure(Exception):
    def __init__(self, category: ToolErrorCategory, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


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


class FsProvider(ProviderBase):
    name = "fs"
    version = "0.1.0"
    description = "Read, write and list files inside the trial's workspace."
    operations = OPERATIONS

    def __init__(self, protocol_version: int = PROVIDER_PROTOCOL_VERSION) -> None:
        super().__init__(protocol_version)
        self._handlers: dict[str, Callable[[Path, dict[str, Any], str], dict[str, Any]]] = {
            "read": _read,
            "write": _write,
            "list": _list,
        }

    async def invoke(self, message: InvokeRequest) -> AsyncIterator[InvokeResponse]:
        try:
            handler = self._handlers.get(_ALIAS.get(message.operation, message.operation))
            if handler is None:
                raise _Failure(ToolErrorCategory.NOT_FOUND, f"no operation {message.operation!r}")
            arguments = _arguments(message.arguments_json, _DECLARED[message.operation])
            field = _PATH_FIELD.get(message.operation)
            if field is not None and field in arguments:
                arguments["path"] = arguments.pop(field)
            workspace = message.call_context.working_directory if message.call_context else ""
            path = arguments.get("path", ".")
            try:
                target = confine(workspace, path)
            except Escape as error:
                raise _Failure(ToolErrorCategory.PERMISSION_DENIED, str(error)) from error
            output = handler(target, arguments, path)
        except _Failure as failure:
            yield InvokeResponse(error=ToolError(category=failure.category, message=failure.message))
            return
        yield InvokeResponse(result=InvokeResult(output_json=json.dumps(output)))


def _arguments(text: str, declared: frozenset[str]) -> dict[str, Any]:
    try:
        value: Any = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise _Failure(ToolErrorCategory.INVALID_ARGUMENTS, f"arguments are not JSON: {error}") from error
    if not isinstance(value, dict):
        raise _Failure(ToolErrorCategory.INVALID_ARGUMENTS, "arguments must be a JSON object")
    arguments = cast(dict[str, Any], value)
    undeclared = sorted(set(arguments) - declared)
    if undeclared:
        raise _Failure(
            ToolErrorCategory.INVALID_ARGUMENTS,
            f"unknown argument(s) {', '.join(map(repr, undeclared))}; this operation takes {', '.join(sorted(declared))}",
        )
    for key in ("path", "file_path", "dir_path", "content"):
        if key in arguments and not isinstance(arguments[key], str):
            raise _Failure(ToolErrorCategory.INVALID_ARGUMENTS, f"{key!r} must be a string")
    return arguments


def _os_failure(path: str, error: OSError) -> _Failure:
    if isinstance(error, FileNotFoundError):
        return _Failure(ToolErrorCategory.NOT_FOUND, f"{path!r} does not exist")
    if isinstance(error, PermissionError):
        return _Failure(ToolErrorCategory.PERMISSION_DENIED, f"{path!r}: permission denied")
    return _Failure(ToolErrorCategory.EXECUTION_FAILED, f"{path!r}: {error.strerror or error}")


def _read(target: Path, arguments: dict[str, Any], path: str) -> dict[str, Any]:
    if "path" not in arguments:
        raise _Failure(ToolErrorCategory.INVALID_ARGUMENTS, "'path' is required")
    try:
        with target.open("rb") as file:
            data = file.read(_MAX_READ_BYTES + 1)
    except OSError as error:
        raise _os_failure(path, error) from error
    if len(data) > _MAX_READ_BYTES:
        raise _Failure(ToolErrorCategory.EXECUTION_FAILED, f"{path!r} is larger than {_MAX_READ_BYTES} bytes")
    return {"path": path, "content": data.decode("utf-8", errors="replace")}


def _write(target: Path, arguments: dict[str, Any], path: str) -> dict[str, Any]:
    if "path" not in arguments or "content" not in arguments:
        raise _Failure(ToolErrorCategory.INVALID_ARGUMENTS, "'path' and 'content' are required")
    data = str(arguments["content"]).encode("utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as error:
        raise _os_failure(path, error) from error
    return {"path": path, "bytes_written": len(data)}


def _list(target: Path, arguments: dict[str, Any], path: str) -> dict[str, Any]:
    try:
        children = sorted(target.iterdir())
    except OSError as error:
        raise _os_failure(path, error) from error
    entries = [
        {"name": child.name, "type": "dir" if child.is_dir() else "file" if child.is_file() else "other"}
        for child in children
    ]
    return {"path": path, "entries": entries}
