"""Public-style conditional ``scripted_flow`` turns, checked and put in the form the scripted user reads.

``{if_assistant_contains: phrase, user: text}`` (or ``content: text`` with ``role: user``) answers an
assistant message that contains the phrase; ``{default: text}`` answers when no rule matches
(users/scripted.py says in which order). A turn mixing the two, or a rule with nothing to say, has no
single meaning and is refused.
"""

from __future__ import annotations

from typing import Any

from .files import ScriptedTurnFile

__all__ = ["conditional_turn"]


def conditional_turn(turn: ScriptedTurnFile) -> dict[str, Any] | str:
    """The scripted user's form of a conditional turn, or why it cannot be one."""
    if turn.if_assistant_contains is not None and turn.default is not None:
        return "give if_assistant_contains (with user) or default, not both in one turn"
    if turn.role is not None and turn.role != "user":
        return f"role must be 'user' (a script says the user's turns), got {turn.role!r}"
    if turn.default is not None:
        if turn.user is not None or turn.content is not None:
            return "a default turn is {default: text} alone: the default is what the user says"
        return {"default": turn.default}
    phrase = turn.if_assistant_contains or ""
    if not phrase.strip():
        return "if_assistant_contains must be a non-empty phrase (an empty one matches every message)"
    texts = [text for text in (turn.user, turn.content) if text is not None]
    if len(texts) != 1:
        return "a rule is {if_assistant_contains: phrase, user: text}: give the text once (user or content)"
    return {"if_assistant_contains": phrase, "user": texts[0]}
