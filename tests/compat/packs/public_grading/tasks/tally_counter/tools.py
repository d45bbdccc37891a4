"""Tally tools: ``data`` holds plain values (``counter``, ``label``, ``notes``) beside the ``operations`` table."""

from __future__ import annotations

import json
from typing import Any


class UpdateCounter:
    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "update_counter",
                "description": "Add an amount to the tally.",
                "parameters": {
                    "type": "object",
                    "properties": {"amount": {"type": "integer"}},
                    "required": ["amount"],
                },
            },
        }

    @staticmethod
    def invoke(data: dict[str, Any], amount: int) -> str:
        data["counter"] += amount
        data["notes"].append(f"added {amount}")
        data["operations"].append({"op": "add", "amount": amount})
        return json.dumps({"label": data["label"], "counter": data["counter"]})


TOOLS = {"update_counter": UpdateCounter}
