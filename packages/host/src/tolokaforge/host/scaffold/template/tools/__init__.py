"""The pack's tools: one class per tool, ``get_info()`` (an OpenAI function schema) and
``invoke(data, **arguments)`` returning the text the model sees. ``data`` is the trial's state;
write tools change it in place. ``TOOLS`` lists them."""

from __future__ import annotations

import json
from typing import Any, ClassVar

Data = dict[str, Any]


def _schema(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


def _note(data: Data, note_id: str) -> dict[str, Any]:
    note = data["notes"].get(note_id)
    if note is None:
        raise ValueError(f"Note {note_id} not found")
    return note


class GetNote:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("get_note", "Read one note by its id.", {"note_id": {"type": "string"}})

    @staticmethod
    def invoke(data: Data, note_id: str) -> str:
        return json.dumps(_note(data, note_id), sort_keys=True)


class CloseNote:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return _schema("close_note", "Mark a note as done.", {"note_id": {"type": "string"}})

    @staticmethod
    def invoke(data: Data, note_id: str) -> str:
        note = _note(data, note_id)
        if note["status"] == "closed":
            raise ValueError(f"Note {note_id} is already closed")
        note["status"] = "closed"
        return json.dumps(note, sort_keys=True)


TOOLS = [GetNote, CloseNote]
