"""What an agent or a simulated user hands the trial loop: a turn, its proposed calls, its spend.

A turn's calls carry the provider's own id (which may repeat or be empty) and the arguments exactly
as produced; the trial loop assigns episode-unique ids and sends the raw arguments to the runner, which
is the one judge of whether they are valid.

The loop's answer to a call that produced files beside its text (a browser call's screenshot) is an
:class:`AttachedToolMessage`: a transcript ``ToolMessage`` that also carries them, for the model to see
(``for_model``) and for the trial's files to keep. The runner's wire transcript never carries them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tolokaforge.core.runner_api import Attachment
from tolokaforge.core.transcript import ToolMessage

__all__ = ["AgentTurn", "AttachedToolMessage", "ModelUsage", "ProposedCall", "Usage", "UserTurn"]


@dataclass(frozen=True, slots=True)
class AttachedToolMessage(ToolMessage):
    """A tool result with the files its call produced; everything else reads it as a ``ToolMessage``."""

    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class ProposedCall:
    id: str
    name: str
    arguments_json: str


@dataclass
class ModelUsage:
    """One model's share of a trial's spend."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    llm_calls: int = 0

    def add(self, other: ModelUsage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd = (
            None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        )
        self.llm_calls += other.llm_calls


@dataclass
class Usage:
    """Spend of one trial's LLM traffic (agent and simulated user together), in total and per model."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    """None once any call's model had no price: a partial sum would read as the whole cost."""
    llm_calls: int = 0
    llm_retries: int = 0
    retry_log: list[str] = field(default_factory=list[str])
    by_model: dict[str, ModelUsage] = field(default_factory=dict[str, ModelUsage])

    def record_call(self, model: str, prompt: int, completion: int, cost_usd: float | None) -> None:
        """One answered completion of ``model``."""
        self.add(
            Usage(
                prompt, completion, cost_usd, 1, by_model={model: ModelUsage(prompt, completion, cost_usd, 1)}
            )
        )

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd = (
            None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        )
        self.llm_calls += other.llm_calls
        self.llm_retries += other.llm_retries
        self.retry_log.extend(other.retry_log)
        for model, spend in other.by_model.items():
            self.by_model.setdefault(model, ModelUsage()).add(spend)


@dataclass(frozen=True)
class AgentTurn:
    """One assistant turn. ``done`` declares the task finished once this turn's calls have run.

    ``executor`` ``"user"`` is for the golden agent alone, replaying a golden action of the user's side
    (a device action in a dual-control task): the loop records the calls as a user message without text,
    runs them with executor "user" and asks the agent again; such a turn is no assistant turn and says
    nothing (its ``content`` is not used). Without calls it is an ordinary assistant turn.
    """

    content: str
    tool_calls: tuple[ProposedCall, ...] = ()
    done: bool = False
    usage: Usage | None = None
    executor: Literal["agent", "user"] = "agent"


@dataclass(frozen=True)
class UserTurn:
    """One simulated-user turn. ``stop`` ends the conversation (the user said ###STOP###)."""

    content: str
    tool_calls: tuple[ProposedCall, ...] = ()
    stop: bool = False
    usage: Usage | None = None
