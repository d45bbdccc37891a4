"""A call's arguments checked against the operation's own input schema, before anything is opened.

The runner checks them too, but a provider is also called directly (the pytest plugin's conformance
items do), and every bad argument must come back as invalid_arguments, never as a Python error. The
schemas here use a small subset of JSON Schema -- ``type`` (string, integer, boolean), ``minimum``,
``minLength``, ``required`` and ``additionalProperties: false`` -- and this module reads exactly
that subset.
"""

from __future__ import annotations

import json
from typing import Any, cast

from tolokaforge.contracts.tool import ToolErrorCategory

from .paths import Refusal

__all__ = ["checked_arguments"]

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "boolean": (bool,)}


def checked_arguments(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments ``text`` holds, or a :class:`Refusal` (invalid_arguments) naming what is wrong."""
    try:
        value: Any = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise _invalid(f"arguments are not JSON: {error}") from error
    if not isinstance(value, dict):
        raise _invalid("arguments must be a JSON object")
    arguments = cast(dict[str, Any], value)
    properties = cast(dict[str, dict[str, Any]], schema["properties"])
    undeclared = sorted(set(arguments) - set(properties))
    if undeclared:
        raise _invalid(
            f"unknown argument(s) {', '.join(map(repr, undeclared))}; "
            f"this operation takes {', '.join(properties) or 'none'}"
        )
    missing = [name for name in cast(list[str], schema.get("required", [])) if name not in arguments]
    if missing:
        raise _invalid(f"missing required argument(s) {', '.join(map(repr, missing))}")
    for name, given in arguments.items():
        _check(name, given, properties[name])
    return arguments


def _check(name: str, value: Any, rule: dict[str, Any]) -> None:
    kind = str(rule["type"])
    # bool is an int in Python; in JSON it is not.
    if not isinstance(value, _TYPES[kind]) or (kind == "integer" and isinstance(value, bool)):
        raise _invalid(
            f"{name!r} must be a{'n' if kind == 'integer' else ''} {kind}, not {json.dumps(value)}"
        )
    if "minimum" in rule and value < rule["minimum"]:
        raise _invalid(f"{name!r} must be at least {rule['minimum']}, not {value}")
    if "minLength" in rule and len(value) < rule["minLength"]:
        raise _invalid(f"{name!r} must not be empty")


def _invalid(message: str) -> Refusal:
    return Refusal(ToolErrorCategory.INVALID_ARGUMENTS, message)
