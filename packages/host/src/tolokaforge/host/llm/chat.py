"""The host's chat client: the llm agent's and the LLM user's, over core's one chat-completions client.

What is retried and how is core's (``tolokaforge.core.llm``): HTTP 429, HTTP 5xx and timeouts, with
exponential backoff and jitter (``Retry-After`` honoured), at most ``max_retries`` times; each request
waits at most ``timeout_s`` (``--llm-timeout`` / ``--llm-max-retries``), so a hung endpoint costs at
most (max_retries + 1) x timeout_s per turn, not minutes per try. Every other failure raises
:class:`AgentError` at once. Here each retry is logged on the trial's usage, so a run shows what it
waited for, each answer is priced, and a turn that gives up carries its usage on its :class:`AgentError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import aiohttp

from tolokaforge.core.llm import ChatCompletions, ChatEndpoint, ChatExhausted, ChatRefused, ChatUnavailable
from tolokaforge.core.retry import Backoff

from ..errors import AgentError, ConfigError
from ..turns import Usage
from .pricing import PriceTable, price_for

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "ChatClient",
    "ChatResult",
    "ChatSettings",
    "api_key_from_env",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 2


def api_key_from_env() -> str | None:
    """TOLOKAFORGE_LLM_API_KEY, else OPENAI_API_KEY (the variable the OpenAI ecosystem uses)."""
    return os.environ.get("TOLOKAFORGE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")


@dataclass(frozen=True)
class ChatSettings:
    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    temperature: float | None = None
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
        if not settings.api_key:
            raise ConfigError(
                "the llm agent needs an API key: set TOLOKAFORGE_LLM_API_KEY (or OPENAI_API_KEY)"
            )
        self.settings = settings
        self._price = price_for(prices, settings.model)
        endpoint = ChatEndpoint(
            model=settings.model,
            base_url=settings.base_url,
            api_key=settings.api_key,
            temperature=settings.temperature,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            # Jitter keeps many concurrent trials from retrying in lockstep; a server's Retry-After wins.
            backoff=Backoff(settings.backoff_base_s, settings.backoff_max_s, jitter=True),
        )
        self._chat = ChatCompletions(endpoint, session)

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
            ) from failure
        except ChatRefused as failure:
            raise AgentError(f"chat completion {failure}", usage) from failure
        prompt, answered = completion.prompt_tokens, completion.completion_tokens
        cost = self._price.cost(prompt, answered) if self._price is not None else None
        usage.record_call(self.settings.model, prompt, answered, cost)
        return ChatResult(message=completion.message, usage=usage)

    def _why(self, error: ChatUnavailable) -> str:
        # The flag's name tells a user which knob a timeout is about.
        if error.timed_out:
            return f"no answer within --llm-timeout {self.settings.timeout_s:g}s"
        return str(error)
