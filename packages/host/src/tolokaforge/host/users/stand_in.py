"""The user a golden run puts where a task wants an LLM user: one fixed line, no model, no cost.

The golden agent acts on the task's golden path whatever the user says, so a golden run of a pack
with LLM users (τ²'s domains, say) needs no user model; this user opens the conversation with a line
that says what it is and then has nothing more to say. With a user model configured the LLM user plays
instead, as in any run.
"""

from __future__ import annotations

from collections.abc import Sequence

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.transcript import Message

from ..turns import UserTurn

__all__ = ["STAND_IN_LINE", "StandInUser"]

STAND_IN_LINE = "(golden run: no user model; this line stands in for the simulated user)"


class StandInUser:
    async def next_turn(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> UserTurn:
        return UserTurn(content=STAND_IN_LINE)
