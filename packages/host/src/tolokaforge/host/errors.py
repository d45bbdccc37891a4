"""Every error the host raises on purpose, in one tree::

    HostError                      anything the host reports as one clear line
    ├── PackLoadError              a pack has problems (``.problems``: each names its file and key)
    ├── AgentError                 the agent could not produce a turn (provider failure, bad file)
    ├── EndpointUnreachableError   the model endpoint did not answer the up-front check
    ├── ModelRefusedError          the model provider refused the up-front check (key, model)
    └── ConfigError                a CLI/setting value the host cannot use (missing key, bad file)

What a runner answers it cannot do is the Runner interface's own tree (``RunnerError`` and its kinds:
unavailable, registration failed, trial lost, grading failed; tolokaforge.core.runner_api), re-exported
here. Errors that end a trial are recorded on its trajectory as data; only prerequisite failures (a pack
that does not load, a runner that cannot be reached) stop a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tolokaforge.core.runner_api import (
    RegistrationFailedError,
    RunnerError,
    RunnerUnavailableError,
    TrialLostError,
)

from .turns import Usage

__all__ = [
    "AgentError",
    "ConfigError",
    "EndpointUnreachableError",
    "HostError",
    "ModelRefusedError",
    "PackLoadError",
    "PackProblem",
    "RegistrationFailedError",
    "RunnerError",
    "RunnerUnavailableError",
    "TrialLostError",
]


class HostError(Exception):
    """Base of the host's own errors; ``str()`` is fit to print as one line."""

    retryable: bool = False
    """Whether trying the same thing again may succeed (decided from typed answers, never from text)."""


@dataclass(frozen=True)
class PackProblem:
    """One defect of a pack: the file it is in, the dotted key it is about, and what is wrong."""

    file: Path
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else str(self.file)
        return f"{where}: {self.message}"


class PackLoadError(HostError):
    """The pack has at least one problem; all of them are in ``problems``."""

    def __init__(self, problems: Sequence[PackProblem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        head = str(self.problems[0]) if self.problems else "no problems recorded"
        more = f" (and {count - 1} more)" if count > 1 else ""
        super().__init__(f"{head}{more}")


class AgentError(HostError):
    """The agent (or the simulated user) could not produce a turn.

    ``usage`` is what the failed turn spent before giving up (its retries, their causes), so the
    trial's metrics count it rather than report ``llm_retries: 0`` for a turn that retried five times.
    ``infrastructure`` is True when the provider, not the conversation, is at fault (a refused key, an
    unknown model, no answer, no tries left): the trial then stays unfinished and ``--resume`` runs it.
    """

    def __init__(self, message: str, usage: Usage | None = None, *, infrastructure: bool = False) -> None:
        super().__init__(message)
        self.usage = usage
        self.infrastructure = infrastructure


class EndpointUnreachableError(HostError):
    """The model endpoint did not answer at all before the run (refused, unresolvable, hung)."""


class ModelRefusedError(HostError):
    """A model provider answered the up-front check with a refusal: the key or the model is wrong."""


class ConfigError(HostError):
    """A setting the host cannot use."""
