"""The judge's chat-completions client: core's, the one the host's agent and simulated user use too.

Only what may succeed on a second try is retried -- HTTP 429 and 5xx and timeouts, ``max_http_retries``
times with exponential backoff from ``backoff_s`` (a server's ``Retry-After`` wins); anything else (a
4xx, a refused connection, a body that is not a completion) raises :class:`JudgeFailed` at once. The
API key comes from the runner's own environment: the first variable of
``JudgeModelConfig.api_key_env`` that is set.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

from tolokaforge.core.llm import (
    ChatCompletions,
    ChatEndpoint,
    ChatExhausted,
    ChatRefused,
    Completion,
    split_model,
)
from tolokaforge.core.models import JudgeModelConfig
from tolokaforge.core.retry import Backoff

__all__ = ["HttpJudgeChat", "JudgeChat", "JudgeFailed", "resolve_api_key"]


class JudgeFailed(Exception):
    """The judgement cannot finish: the judge is ERRORED with this message as the reason."""


class JudgeChat(Protocol):
    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion: ...


def resolve_api_key(config: JudgeModelConfig, environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    for name in config.api_key_env:
        value = environ.get(name)
        if value:
            return value
    raise JudgeFailed(
        f"no API key for judge model {config.model!r}: set one of {', '.join(config.api_key_env)} "
        "in the runner's environment"
    )


class HttpJudgeChat:
    """The judge's model over core's chat-completions client, its failures as :class:`JudgeFailed`."""

    def __init__(self, config: JudgeModelConfig, api_key: str, session: aiohttp.ClientSession) -> None:
        provider, model = split_model(config.model)
        try:
            endpoint = ChatEndpoint(
                model=model,
                provider=provider,
                base_url=config.base_url,
                api_key=api_key,
                temperature=config.temperature,
                seed=config.seed,
                max_tokens=config.max_tokens,
                reasoning_effort=config.reasoning_effort,
                timeout_s=config.request_timeout_s,
                max_retries=config.max_http_retries,
                backoff=Backoff(config.backoff_s, max_s=math.inf),
            )
        except ValueError as error:
            raise JudgeFailed(f"judge model {config.model!r}: {error}") from error
        self._chat = ChatCompletions(endpoint, session)

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        try:
            return await self._chat.complete(messages, tools)
        except ChatExhausted as failure:
            last = failure.last
            why = f"timeout after {self._chat.endpoint.timeout_s:g}s" if last.timed_out else str(last)
            raise JudgeFailed(f"judge endpoint failed after {failure.attempts} attempts: {why}") from failure
        except ChatRefused as failure:
            raise JudgeFailed(f"judge endpoint {failure}") from failure
