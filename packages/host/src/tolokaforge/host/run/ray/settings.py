"""What a Ray run needs to know beyond a local one (no Ray import here: it is the cheap half)."""

from __future__ import annotations

from dataclasses import dataclass

from tolokaforge.core.models import DEFAULT_JUDGE_KEY_ENV

from ...agents.setup import AgentRecipe

__all__ = ["CREDENTIAL_VARIABLES", "RaySettings"]

CREDENTIAL_VARIABLES = tuple(
    dict.fromkeys(("TOLOKAFORGE_LLM_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", *DEFAULT_JUDGE_KEY_ENV))
)
"""Copied from the driver's environment into each worker's runtime environment, and nowhere else: the
agent's and users' key (either provider's), and the judge's (the worker's embedded runner reads it; docs/judge.md). A judge
model naming other variables (``api_key_env``) has those copied too."""


@dataclass(frozen=True)
class RaySettings:
    address: str
    """``auto`` (the cluster this machine belongs to), ``local`` (start one in this process for the run)
    or the head's ``HOST:PORT`` / ``ray://HOST:PORT``."""
    recipe: AgentRecipe
    """How each worker rebuilds the agent and users (they cannot be sent: they hold HTTP sessions)."""
    max_workers: int | None = None
    """Cap on workers; None: one per CPU of the cluster."""
    worker_cpus: float = 1.0
    """CPUs a worker reserves (Ray's ``num_cpus``): the cluster's CPUs / this = the workers it holds."""
