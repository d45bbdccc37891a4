"""Helpers shared by the agent-side and user-side tools."""

from __future__ import annotations

import json
from typing import Any

Data = dict[str, Any]
TODAY = "2026-03-15"
LINE_ID: dict[str, Any] = {"type": "string", "pattern": "^L-[0-9]{4}$", "description": "Line id, e.g. L-1001"}


def dump(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)


def schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def line(data: Data, line_id: str) -> dict[str, Any]:
    record = data["lines"].get(line_id)
    if record is None:
        raise ValueError(f"Line {line_id} not found")
    return record


def device(data: Data, line_id: str) -> dict[str, Any]:
    record = data["devices"].get(line_id)
    if record is None:
        raise ValueError(f"No phone registered for line {line_id}")
    return record


def attached(data: Data, line_id: str) -> tuple[bool, str]:
    """Whether the network sees the phone, and why not."""
    phone, account = device(data, line_id), line(data, line_id)
    if phone["airplane_mode"]:
        return False, "device not registered on the network (radio off)"
    if phone["location"] != "US" and not (account["roaming_enabled"] and phone["roaming_switch"]):
        return False, f"device in {phone['location']}: roaming not available on the line or the phone"
    return True, "registered"
