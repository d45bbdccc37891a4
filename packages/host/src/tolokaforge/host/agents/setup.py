"""Who plays the agent and the users of a run, as a plain value that can be rebuilt in another process.

The CLI builds the agent and user factories from an :class:`AgentRecipe` in its own process; a Ray
worker receives the same recipe (it pickles: no session, no key inside) and builds its own factories
against its own HTTP session. The API key is never part of the recipe: every process reads it from
its environment (``api_key_from_env``), which for a Ray worker is the runtime environment the driver
gave it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from tolokaforge.core.llm import split_model

from ..errors import ConfigError
from ..llm import ChatClient, ChatSettings, api_key_from_env, load_prices
from ..llm.chat import DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from ..llm.generation import Generation
from ..llm.preflight import ModelCheck
from ..llm.pricing import PriceTable
from ..users import LLMUserFactory
from ..users.router import UserRouter
from . import GoldenAgentFactory, LLMAgentFactory, ScriptedAgentFactory
from .base import AgentFactory
from .scripted import Script

__all__ = ["AgentRecipe", "LLMOptions"]


@dataclass(frozen=True)
class LLMOptions:
    model: str | None
    user_model: str | None
    base_url: str
    prices: Path | None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    generation: Generation = field(default_factory=Generation)
    """The agent model's settings (``--gen agent.*`` over a run_config.yaml's); None values send none."""
    user_generation: Generation = field(default_factory=Generation)
    anthropic_base_url: str = DEFAULT_ANTHROPIC_BASE_URL
    """Where ``anthropic/`` models are served; ``base_url`` serves every other model."""

    def base_url_for(self, model: str) -> str:
        return self.anthropic_base_url if split_model(model)[0] == "anthropic" else self.base_url


@dataclass(frozen=True)
class AgentRecipe:
    agent: str
    """``golden``, ``scripted`` or ``llm``."""
    llm: LLMOptions
    script: Script | None = None
    llm_users: bool = False
    """Whether a task of the pack has an LLM user (it then needs ``user_model`` or ``model``)."""
    prices: PriceTable = field(default_factory=lambda: load_prices(None))
    """Read once where the run starts (``--prices`` need not exist on a worker's machine)."""

    @classmethod
    def of(cls, agent: str, llm: LLMOptions, script: Script | None, llm_users: bool) -> AgentRecipe:
        return cls(agent, llm, script, llm_users, load_prices(llm.prices))

    @property
    def user_model(self) -> str | None:
        return self.llm.user_model or self.llm.model

    def build(self, session: aiohttp.ClientSession) -> tuple[AgentFactory, UserRouter]:
        """The factories of this recipe; LLM clients use ``session`` and the key in this environment."""
        agents: AgentFactory
        if self.agent == "golden":
            agents = GoldenAgentFactory()
        elif self.agent == "scripted":
            if self.script is None:
                raise ConfigError("--agent scripted needs --script FILE")
            agents = ScriptedAgentFactory(self.script)
        elif self.agent == "llm":
            if not self.llm.model:
                raise ConfigError("--agent llm needs --model (or TOLOKAFORGE_MODEL)")
            agents = LLMAgentFactory(self._chat(self.llm.model, session, self.llm.generation))
        else:
            raise ConfigError(f"unknown agent {self.agent!r} (golden, scripted or llm)")
        user_model = self.user_model
        users = UserRouter(
            llm=LLMUserFactory(self._chat(user_model, session, self.llm.user_generation))
            if self.llm_users and user_model
            else None,
            stand_in=self.agent == "golden",
        )
        return agents, users

    def model_checks(self) -> list[ModelCheck]:
        """The models :meth:`build` will call, by role, for the preflight (none for golden or scripted).

        Without a key there is nothing to check: :meth:`build` refuses that first."""
        roles: list[tuple[str, str]] = []
        if self.agent == "llm" and self.llm.model:
            roles.append(("agent", self.llm.model))
        if self.llm_users and self.user_model:
            roles.append(("user simulator", self.user_model))
        return [
            ModelCheck(
                role, model, self.llm.base_url_for(model), key, self.llm.timeout_s, self.llm.max_retries
            )
            for role, model in roles
            if (key := api_key_from_env(model))
        ]

    def _chat(self, model: str, session: aiohttp.ClientSession, generation: Generation) -> ChatClient:
        settings = ChatSettings(
            model=model,
            base_url=self.llm.base_url_for(model),
            api_key=api_key_from_env(model),
            temperature=generation.temperature,
            seed=generation.seed,
            max_tokens=generation.max_tokens,
            reasoning_effort=generation.reasoning_effort,
            timeout_s=self.llm.timeout_s,
            max_retries=self.llm.max_retries,
        )
        return ChatClient(settings, session, dict(self.prices))
