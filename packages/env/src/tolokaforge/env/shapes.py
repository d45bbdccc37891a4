"""What the environment hands a trainer: observations, step infos, rewards, finished episodes.

Plain frozen values (they cross Ray's object store from a remote worker unchanged). Messages and tools
are in the chat-completions format a trainer's model already speaks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tolokaforge.core.models import GradingConfig
from tolokaforge.host import TrialOutcome, configured_components, grade_to_dict

__all__ = ["EpisodeResult", "Observation", "Reward", "StepInfo"]


@dataclass(frozen=True)
class Observation:
    system_prompt: str
    tools: list[dict[str, Any]]
    """The agent's tools as chat-completions function schemas (shared by the task's episodes: read only)."""
    messages: list[dict[str, Any]]
    """Chat messages new since the last observation (after reset: the system message and the first user
    message); never the assistant message the caller just sent."""
    done: bool = False


@dataclass(frozen=True)
class StepInfo:
    turn: int
    """How many assistant messages the episode has taken, this one included."""
    termination: str | None = None
    """Why the episode ended (``user_stop``, ``max_turns``, ``agent_done``, ``error``, ...); None while it goes on."""
    tool_statuses: tuple[str, ...] = ()
    """The runner's status of each call this step ran (``SUCCESS``, ``ERROR``, ``INVALID_ARGUMENTS``, ...),
    the simulated user's calls included."""
    error: str | None = None
    """What ended the episode, when something went wrong."""


@dataclass(frozen=True)
class Reward:
    value: float
    """The grade's score; 0.0 for an episode without a grade."""
    passed: bool
    components: Mapping[str, float | None] = field(default_factory=dict[str, float | None])
    """Component scores by name, as ``grade.yaml`` lists them (None: not evaluated)."""
    reasons: tuple[str, ...] = ()
    """The grade's reasons; for an episode without a grade, why it has none."""
    graded: bool = True
    trial_id: str = ""
    termination: str | None = None

    @classmethod
    def of(cls, outcome: TrialOutcome, grading: GradingConfig) -> Reward:
        """The reward of a finished trial: its grade as ``grade.yaml`` records it."""
        termination = outcome.termination.value if outcome.termination is not None else None
        grade = outcome.grade
        if grade is None:
            why = (
                outcome.grading_error
                or outcome.infrastructure_error
                or outcome.episode.error
                or f"not gradeable: the episode ended {termination}"
            )
            return cls(0.0, False, {}, (why,), False, outcome.trial_id, termination)
        document = grade_to_dict(grade, configured_components(grading))
        components = cast(Mapping[str, float | None], document["components"])
        reasons = cast(Sequence[str], document["reasons"])
        score = document["score"]
        return cls(
            float(score) if isinstance(score, int | float) else 0.0,
            bool(document["binary_pass"]),
            dict(components),
            tuple(reasons),
            True,
            outcome.trial_id,
            termination,
        )


@dataclass(frozen=True)
class EpisodeResult:
    """One finished rollout episode."""

    task_id: str
    seed: int
    reward: Reward
    messages: list[dict[str, Any]]
    """The whole conversation as the agent saw it, the assistant's own messages included."""
    steps: int
    trial_id: str
