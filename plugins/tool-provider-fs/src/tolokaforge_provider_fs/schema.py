"""What the fs provider declares: each operation's arguments, output, kind, risk and concurrency.

Two families share the workspace. ``read`` / ``write`` / ``list`` are ours, answering structured JSON
only. The file tools under the public Tolokaforge names (``read_file``, ``write_file``, ``list_dir``,
``append_file``, ``copy_file``, ``move_file``, ``delete_file``, ``grep_workspace``,
``replace_lines``) take the public argument names and also give the model the public tools' text
(InvokeResult.text), so a pack written for the public project reads the same answers here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tolokaforge.contracts.tool import ConcurrencySpec, OperationSchema, RiskClass, ToolKind

__all__ = ["INPUT_SCHEMAS", "OPERATIONS", "Outcome"]


@dataclass(frozen=True)
class Outcome:
    """An operation's answer: the structured output (valid against its output schema) and the text
    the model reads ("" for the structured-only family, whose JSON is what the model sees)."""

    output: dict[str, Any]
    text: str = ""


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_PATH_HELP = (
    "relative to the workspace, or absolute under /env/fs/agent-visible (the workspace's agent-visible name)"
)


def _path(what: str) -> dict[str, Any]:
    return {"type": "string", "description": f"{what}, {_PATH_HELP}."}


_STR = {"type": "string"}
_INT = {"type": "integer"}
_ENTRY = _object({"name": _STR, "type": {"enum": ["file", "dir", "other"]}}, ["name", "type"])
_NAMES = {"type": "array", "items": _STR}
_LISTING = _object({"path": _STR, "entries": {"type": "array", "items": _ENTRY}}, ["path", "entries"])
_WRITTEN = _object({"path": _STR, "bytes_written": _INT}, ["path", "bytes_written"])
_DONE = _object({"path": _STR}, ["path"])
_TRANSFER = _object({"source": _STR, "destination": _STR}, ["source", "destination"])
_SOURCE_DESTINATION = _object(
    {"source": _path("The file or folder to take"), "destination": _path("Where it goes")},
    ["source", "destination"],
)


def _operation(
    name: str,
    description: str,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    *,
    risk: RiskClass = RiskClass.READ_ONLY,
    idempotent: bool = True,
    keyed_by: list[str] | None = None,
    timeout_s: float = 10.0,
) -> OperationSchema:
    mutating = risk != RiskClass.READ_ONLY
    return OperationSchema(
        name=name,
        description=description,
        input_schema_json=json.dumps(inputs),
        output_schema_json=json.dumps(outputs),
        kind=ToolKind.RESOURCE if mutating else ToolKind.DATA_SOURCE,
        risk=risk,
        idempotent=idempotent,
        # Reads run together; a write is serialized per path. keyed_by=None on a mutating operation
        # means it touches two paths (copy, move), so it runs alone.
        concurrency=ConcurrencySpec(safe=not mutating or keyed_by is not None, key_fields=keyed_by or []),
        default_timeout_seconds=timeout_s,
    )


_STRUCTURED = [
    _operation(
        "read",
        "Read a text file of the workspace.",
        _object({"path": _path("The file")}, ["path"]),
        _object({"path": _STR, "content": _STR}, ["path", "content"]),
    ),
    _operation(
        "write",
        "Write a text file of the workspace (created or replaced), creating its folders.",
        _object({"path": _path("The file"), "content": _STR}, ["path", "content"]),
        _WRITTEN,
        risk=RiskClass.MUTATING,
        keyed_by=["path"],
    ),
    _operation(
        "list",
        "List a folder of the workspace (the workspace itself by default).",
        _object({"path": _path("The folder")}, []),
        _LISTING,
    ),
]

_FILE_TOOLS = [
    _operation(
        "read_file",
        "Read a text file of the workspace, whole or a slice of its lines.",
        _object(
            {
                "path": _path("The file"),
                "offset": {"type": "integer", "minimum": 1, "description": "First line to return, from 1."},
                "limit": {"type": "integer", "minimum": 0, "description": "At most this many lines."},
                "with_line_numbers": {"type": "boolean", "description": "Prefix each line with its number."},
            },
            ["path"],
        ),
        _object(
            {
                "path": _STR,
                "content": _STR,
                "total_lines": _INT,
                "start_line": _INT,
                "lines_returned": _INT,
            },
            ["path", "content", "total_lines", "start_line", "lines_returned"],
        ),
    ),
    _operation(
        "write_file",
        "Write a text file of the workspace (created or replaced), creating its folders.",
        _object({"path": _path("The file"), "content": _STR}, ["path", "content"]),
        _WRITTEN,
        risk=RiskClass.MUTATING,
        keyed_by=["path"],
    ),
    _operation(
        "list_dir",
        "List a folder of the workspace.",
        _object({"path": _path("The folder")}, ["path"]),
        # Names by kind, as strings: the runner checks every output against this schema, and a list
        # of strings costs it a fraction of a list of objects.
        _object(
            {"path": _STR, "dirs": _NAMES, "files": _NAMES, "others": _NAMES},
            ["path", "dirs", "files", "others"],
        ),
    ),
    _operation(
        "append_file",
        "Append text to a file of the workspace, creating it (and its folders) when missing.",
        _object({"path": _path("The file"), "content": _STR}, ["path", "content"]),
        _WRITTEN,
        risk=RiskClass.MUTATING,
        idempotent=False,
        keyed_by=["path"],
    ),
    _operation(
        "copy_file",
        "Copy a file, or a folder with everything in it; into the destination when that is a folder.",
        _SOURCE_DESTINATION,
        _TRANSFER,
        risk=RiskClass.MUTATING,
        idempotent=False,
    ),
    _operation(
        "move_file",
        "Move or rename a file or folder; into the destination when that is a folder.",
        _SOURCE_DESTINATION,
        _TRANSFER,
        risk=RiskClass.MUTATING,
        idempotent=False,
    ),
    _operation(
        "delete_file",
        "Delete a file, or an empty folder.",
        _object({"path": _path("The file or empty folder")}, ["path"]),
        _DONE,
        risk=RiskClass.DESTRUCTIVE,
        idempotent=False,
        keyed_by=["path"],
    ),
    _operation(
        "grep_workspace",
        "Search the workspace's files: lines matching a regular expression (file:line:text), and/or "
        "files whose name matches a glob. Give pattern, file_glob or both. At most 200 matches.",
        _object(
            {
                "pattern": {"type": "string", "description": "A regular expression (Python syntax)."},
                "file_glob": {"type": "string", "description": "A file-name glob, e.g. '*.py'."},
                "path": _path("The folder to search (the whole workspace by default)"),
            },
            [],
        ),
        _object(
            # Strings, as the model reads them ("path:line:text", or "path" for a glob alone): the
            # runner checks every output against this schema, and 200 objects cost it ~20x more.
            {"matches": {"type": "array", "items": _STR}, "truncated": {"type": "boolean"}},
            ["matches", "truncated"],
        ),
        timeout_s=15.0,
    ),
    _operation(
        "replace_lines",
        "Replace the one occurrence of old_text in a file with new_text; the file is replaced whole "
        "(atomically). old_text must occur exactly once.",
        _object(
            {
                "path": _path("The file"),
                "old_text": {"type": "string", "minLength": 1, "description": "Text that occurs once."},
                "new_text": {"type": "string", "description": "Its replacement."},
            },
            ["path", "old_text", "new_text"],
        ),
        _WRITTEN,
        risk=RiskClass.MUTATING,
        idempotent=False,
        keyed_by=["path"],
    ),
]

OPERATIONS = [*_STRUCTURED, *_FILE_TOOLS]
INPUT_SCHEMAS: dict[str, dict[str, Any]] = {op.name: json.loads(op.input_schema_json) for op in OPERATIONS}
