"""The help desk's own tool, beside the built-in search_kb: closing a ticket with the answer given."""

from __future__ import annotations

from typing import Any


class CloseTicket:
    category = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "close_ticket",
                "description": "Close a help-desk ticket, recording the answer given to the user.",
                "parameters": {
                    "type": "object",
                    "properties": {"ticket_id": {"type": "string"}, "answer": {"type": "string"}},
                    "required": ["ticket_id", "answer"],
                    "additionalProperties": False,
                },
            },
        }

    @staticmethod
    def invoke(data: dict[str, Any], ticket_id: str, answer: str) -> str:
        ticket = data["tickets"][ticket_id]
        ticket["status"] = "closed"
        ticket["answer"] = answer
        return f"Ticket {ticket_id} closed."


TOOLS = {"close_ticket": CloseTicket}
