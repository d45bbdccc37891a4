"""A registered trial: its spec, tool registries, state mirror and call history."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from tolokaforge.core.models import TrialSpec
from tolokaforge.core.transcript.recorded import RecordedToolCall

from .state.mirror import TrialMirror
from .tools import ToolRegistry

__all__ = ["TrialContext"]


@dataclass
class TrialContext:
    """Everything the runner holds for one trial. Calls on one trial run one at a time (``lock``)."""

    spec: TrialSpec
    agent_tools: ToolRegistry
    user_tools: ToolRegistry
    mirror: TrialMirror
    default_timeout_s: float
    history: list[RecordedToolCall] = field(default_factory=lambda: [])
    has_initialized_snapshot: bool = False
    code_root: Path | None = None
    """Where the task's code bundle lives on this runner (custom checks are found there)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def trial_id(self) -> str:
        return self.spec.trial_id

    def registry(self, executor: str) -> ToolRegistry | None:
        return {"agent": self.agent_tools, "user": self.user_tools}.get(executor)

    def next_sequence(self) -> int:
        return len(self.history)
