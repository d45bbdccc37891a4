"""Lamp tools. ``install_lamp`` (set-up) and ``assert_lamp_on`` (grading) are hidden from the model."""

from __future__ import annotations

import json
from typing import Any


def _schema(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(properties)},
        },
    }


def _lamp(data: dict[str, Any], lamp_id: str) -> dict[str, Any]:
    for lamp in data["lamps"]:
        if lamp["lamp_id"] == lamp_id:
            return lamp
    raise ValueError(f"no lamp {lamp_id}")


class InstallLamp:
    hidden = True

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema(
            "install_lamp",
            "Install a lamp, switched off.",
            {"lamp_id": {"type": "string"}, "room": {"type": "string"}},
        )

    @staticmethod
    def invoke(data: dict[str, Any], lamp_id: str, room: str) -> str:
        data["lamps"].append({"lamp_id": lamp_id, "room": room, "on": False})
        return "installed"


class ListLamps:
    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("list_lamps", "List the lamps.", {})

    @staticmethod
    def invoke(data: dict[str, Any]) -> str:
        return json.dumps(data["lamps"])


class SwitchOn:
    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("switch_on", "Switch a lamp on.", {"lamp_id": {"type": "string"}})

    @staticmethod
    def invoke(data: dict[str, Any], lamp_id: str) -> str:
        _lamp(data, lamp_id)["on"] = True
        data["switched"] += 1
        return f"{lamp_id} is on"


class AssertLampOn:
    hidden = True

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("assert_lamp_on", "Whether a lamp is on.", {"lamp_id": {"type": "string"}})

    @staticmethod
    def invoke(data: dict[str, Any], lamp_id: str) -> bool:
        return bool(_lamp(data, lamp_id)["on"])


TOOLS = {
    "install_lamp": InstallLamp,
    "list_lamps": ListLamps,
    "switch_on": SwitchOn,
    "assert_lamp_on": AssertLampOn,
}
