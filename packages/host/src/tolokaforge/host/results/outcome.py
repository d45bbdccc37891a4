"""What became of one trial: its episode (messages, tool calls, termination), grade, lost attempts, spend.

The run loop (``run/``) fills these in; everything that writes or reads results (this package, the
report, the Ray driver) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tolokaforge.contracts.runner import Grade
from tolokaforge.core.termination import TerminationReason
from tolokaforge.core.transcript import Message

from ..turns import Usage

__all__ = ["CallRecord", "Episode", "LostAttempt", "TrialOutcome"]


@dataclass
class CallRecord:
    """One tool call as the runner answered it."""

    call_id: str
    name: str
    executor: str
    arguments_json: str
    status: str
    output: str
    error: str = ""
    error_category: str = ""
    error_details: dict[str, Any] = field(default_factory=dict[str, Any])
    """The runner's details of a failed call (for a tool that raised: ``exception`` and ``traceback``);
    kept in the trial's record, never shown to the model."""
    latency_s: float = 0.0


@dataclass
class Episode:
    messages: list[Message] = field(default_factory=list[Message])
    calls: list[CallRecord] = field(default_factory=list[CallRecord])
    termination: TerminationReason | None = None
    error: str | None = None
    assistant_turns: int = 0
    usage: Usage = field(default_factory=Usage)
    wall_time_s: float = 0.0
    infrastructure_error: str | None = None
    """Set when the runner or the model provider failed it: the episode did not end on its own terms."""
    tool_errors: int = 0
    """Tool calls (agent's and user's) that ExecuteTool did not answer SUCCESS."""
    steps: int = 0
    """Message hops as τ² counts them; counted only under conversation rules."""


@dataclass(frozen=True)
class LostAttempt:
    trial_id: str
    error: str


@dataclass
class TrialOutcome:
    task_id: str
    trial_index: int
    trial_id: str
    episode: Episode
    grade: Grade | None = None
    grading_error: str | None = None
    lost_attempts: list[LostAttempt] = field(default_factory=list[LostAttempt])
    usage: Usage = field(default_factory=Usage)
    wall_time_s: float = 0.0
    infrastructure_error: str | None = None
    """Why the infrastructure, not the agent or the task, ended this trial (it stays unfinished)."""
    judge_price_known: bool = True
    """False when the run's price table has no price for the judge model (its cost is unknown, not 0)."""

    @property
    def termination(self) -> TerminationReason | None:
        return self.episode.termination

    @property
    def passed(self) -> bool:
        return self.grade is not None and self.grade.binary_pass
