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

from ..errors import ConfigError
from ..llm import ChatClient, ChatSettings, api_key_from_env, load_prices
from ..llm.chat import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
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
    temperature: float | None = None
    """The agent model's sampling temperature (a run_config.yaml's); None sends none."""
    user_temperature: float | None = None


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
            agents = LLMAgentFactory(self._chat(self.llm.model, session, self.llm.temperature))
        else:
            raise ConfigError(f"unknown agent {self.agent!r} (golden, scripted or llm)")
        user_model = self.user_model
        users = UserRouter(
            llm=LLMUserFactory(self._chat(user_model, session, self.llm.user_temperature))
            if self.llm_users and user_model
            else None,
            stand_in=self.agent == "golden",
        )
        return agents, users

    def _chat(self, model: str, session: aiohttp.ClientSession, temperature: float | None) -> ChatClient:
        settings = ChatSettings(
            model=model,
            base_url=self.llm.base_url,
            api_key=api_key_from_env(),
            temperature=temperature,
            timeout_s=self.llm.timeout_s,
            max_retries=self.llm.max_retries,
        )
        return ChatClient(settings, session, dict(self.prices))
