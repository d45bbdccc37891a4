"""The host's chat client: the llm agent's and the LLM user's, over core's one chat-completions client.

What is retried and how is core's (``tolokaforge.core.llm``): HTTP 429, HTTP 5xx and timeouts, with
exponential backoff and jitter (``Retry-After`` honoured), at most ``max_retries`` times; each request
waits at most ``timeout_s`` (``--llm-timeout`` / ``--llm-max-retries``), so a hung endpoint costs at
most (max_retries + 1) x timeout_s per turn, not minutes per try. Every other failure raises
:class:`AgentError` at once. Here each retry is logged on the trial's usage, so a run shows what it
waited for, each answer is priced, and a turn that gives up carries its usage on its :class:`AgentError`.
A turn lost to the provider (no tries left, unreachable, key or model refused) is marked
``infrastructure`` on that error, so the trial is left unfinished for ``--resume`` rather than judged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import aiohttp

from tolokaforge.core.llm import (
    ChatCompletions,
    ChatEndpoint,
    ChatExhausted,
    ChatRefused,
    ChatUnavailable,
    ChatUnreachable,
    Provider,
    split_model,
)
from tolokaforge.core.retry import Backoff

from ..errors import AgentError, ConfigError
from ..turns import Usage
from .pricing import PriceTable, price_for

__all__ = [
    "DEFAULT_ANTHROPIC_BASE_URL",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "PROVIDER_FAULT_STATUS",
    "ChatClient",
    "ChatResult",
    "ChatSettings",
    "api_key_from_env",
    "is_provider_fault",
    "key_variables",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Without ``/v1``, as ``ANTHROPIC_BASE_URL`` is written in Anthropic's own tools."""
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 2


PROVIDER_FAULT_STATUS = frozenset({401, 403, 404})
"""Refusals about the run's settings, not the conversation: a key refused, a model the provider lacks."""


def is_provider_fault(error: ChatRefused) -> bool:
    """Whether a refusal says the provider or the run's settings failed, not what the trial sent.

    An unreachable endpoint and a refused key or model qualify; a 400 about the request's content (a
    conversation too long, a malformed tool schema) is the trial's own and does not.
    """
    return isinstance(error, ChatUnreachable) or error.status in PROVIDER_FAULT_STATUS


def key_variables(provider: Provider) -> tuple[str, ...]:
    """The environment variables holding a provider's key, the first set one wins."""
    if provider == "anthropic":
        return ("ANTHROPIC_API_KEY",)
    return ("TOLOKAFORGE_LLM_API_KEY", "OPENAI_API_KEY")


def api_key_from_env(model: str = "") -> str | None:
    """The key for ``model``'s provider: ANTHROPIC_API_KEY for ``anthropic/`` models; else
    TOLOKAFORGE_LLM_API_KEY, then OPENAI_API_KEY (the variable the OpenAI ecosystem uses)."""
    for name in key_variables(split_model(model)[0]):
        if os.environ.get(name):
            return os.environ[name]
    return None


@dataclass(frozen=True)
class ChatSettings:
    model: str
    """As the user wrote it: an ``anthropic/`` prefix selects Anthropic's Messages API (``split_model``)."""
    base_url: str = DEFAULT_BASE_URL
    """The endpoint of this model's provider (for an ``anthropic/`` model, without ``/v1``)."""
    api_key: str | None = None
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0


@dataclass(frozen=True)
class ChatResult:
    message: dict[str, Any]
    """choices[0].message: ``content`` and optionally ``tool_calls``."""
    usage: Usage


class ChatClient:
    """One client per run; ``session`` is owned by the caller (one connection pool for every trial)."""

    def __init__(self, settings: ChatSettings, session: aiohttp.ClientSession, prices: PriceTable) -> None:
        provider, model = split_model(settings.model)
        api_key = settings.api_key
        if not api_key:
            raise ConfigError(
                f"model {settings.model!r} needs an API key: set {' or '.join(key_variables(provider))}"
            )
        self.settings = settings
        self._price = price_for(prices, settings.model)
        try:
            endpoint = self._endpoint(settings, provider, model, api_key)
        except ValueError as error:
            raise ConfigError(f"model {settings.model!r}: {error}") from error
        self._chat = ChatCompletions(endpoint, session)

    @staticmethod
    def _endpoint(settings: ChatSettings, provider: Provider, model: str, api_key: str) -> ChatEndpoint:
        return ChatEndpoint(
            model=model,
            provider=provider,
            base_url=settings.base_url,
            api_key=api_key,
            temperature=settings.temperature,
            seed=settings.seed,
            max_tokens=settings.max_tokens,
            reasoning_effort=settings.reasoning_effort,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            # Jitter keeps many concurrent trials from retrying in lockstep; a server's Retry-After wins.
            backoff=Backoff(settings.backoff_base_s, settings.backoff_max_s, jitter=True),
        )

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatResult:
        usage = Usage()

        def count_retry(error: ChatUnavailable, wait_s: float) -> None:
            usage.llm_retries += 1
            usage.retry_log.append(f"{self._why(error)}; retried after {wait_s:.2f}s")

        try:
            completion = await self._chat.complete(messages, tools, count_retry)
        except ChatExhausted as failure:
            why = self._why(failure.last)
            usage.retry_log.append(f"{why}; gave up (no retries left)")
            retries = usage.llm_retries
            raise AgentError(
                f"chat completion failed after {retries + 1} attempt(s) "
                f"({retries} retries, --llm-max-retries {self.settings.max_retries}): {why}",
                usage,
                infrastructure=True,
            ) from failure
        except ChatRefused as failure:
            raise AgentError(
                f"chat completion {failure}", usage, infrastructure=is_provider_fault(failure)
            ) from failure
        prompt, answered = completion.prompt_tokens, completion.completion_tokens
        cost = self._price.cost(prompt, answered) if self._price is not None else None
        usage.record_call(self.settings.model, prompt, answered, cost)
        return ChatResult(message=completion.message, usage=usage)

    def _why(self, error: ChatUnavailable) -> str:
        # The flag's name tells a user which knob a timeout is about.
        if error.timed_out:
            return f"no answer within --llm-timeout {self.settings.timeout_s:g}s"
        return str(error)
