"""ConversationRules: how a task's conversation runs when it asks for τ²-bench's rules (docs/conversation.md).

A task without rules (``TaskDescription.conversation`` None) runs the harness's own loop: the agent's
turn budget ``max_turns``, ``###STOP###`` from the user, a call of an unknown tool answered with the
runner's error and the episode going on. A task with
rules runs the loop the way τ²-bench's orchestrator runs it: an opening line of the agent's, stop
markers on either side, a budget of message hops instead of assistant turns, a budget of failed tool
calls, and unknown tools answered like any failing tool. The host applies them; the runner only
validates the model, as it does the rest of the task.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ._base import SpecModel

__all__ = ["ConversationRules"]


class ConversationRules(SpecModel):
    """The rules of one task's conversation, as τ²-bench's orchestrator plays them."""

    first_assistant_message: str = ""
    """The agent's opening line, put in the transcript as an assistant message before the user's first
    turn. Not generated, not a turn of the agent's, and no step (τ² says it before its loop starts)."""

    agent_stop_markers: list[str] = []
    """An assistant message whose text contains one of these ends the episode ``agent_done`` (after the
    message's tool calls, if it made any, have run)."""

    user_stop_markers: list[str] = []
    """A user message without tool calls whose text contains one of these ends the episode ``user_stop``
    (τ²: ``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``)."""

    max_steps: int | None = Field(default=None, gt=0)
    """The budget of message hops, counted as τ² counts its orchestrator's steps: every agent or user
    message is one step, and the answers to one message's tool calls are one more. Checked after every
    step that does not hand the turn to the tools; reaching it ends the episode ``max_turns``, even on a
    step that also said a stop marker. Set, it replaces the assistant-turn budget ``max_turns`` and the
    cap on a simulated user's tool rounds. None: those apply as without rules."""

    max_errors: int | None = Field(default=None, gt=0)
    """The budget of failed tool calls (any status but SUCCESS, agent and user calls alike), checked where
    ``max_steps`` is and after it: reaching it ends the episode ``too_many_errors``."""

    unknown_tool: Literal["fail", "answer"] = "answer"
    """``answer``: the caller reads τ²'s text for a call ExecuteTool answers TOOL_NOT_FOUND (``Error: Tool
    '<name>' not found.``, or ``Error: User tools not available`` for a user-side call in a trial that
    offers the user no tools), the call counts as an error, and the episode goes on. ``fail``: such a
    call ends the trial ``tool_not_found``."""

    @field_validator("agent_stop_markers", "user_stop_markers")
    @classmethod
    def _markers_not_empty(cls, markers: list[str]) -> list[str]:
        # An empty marker is contained in every text: it would end the conversation at the first word.
        if any(not marker for marker in markers):
            raise ValueError("a stop marker must be a non-empty string")
        return markers

    def agent_stops(self, text: str) -> bool:
        """Whether an assistant message with this text ends the episode."""
        return any(marker in text for marker in self.agent_stop_markers)

    def user_stops(self, text: str) -> bool:
        """Whether a user message (one without tool calls) with this text ends the episode."""
        return any(marker in text for marker in self.user_stop_markers)
