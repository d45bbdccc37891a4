"""An OpenAI-compatible chat-completions client with tool calling, on aiohttp.

Only what may succeed on a second try is retried: HTTP 429, HTTP 5xx and timeouts, with exponential
backoff (``Retry-After`` honoured when the server sends it). Every other failure — 4xx, a connection
refused, a body that is not a completion — raises :class:`AgentError` at once, because repeating it
spends time and quota for the same answer. Each retry is logged on the trial's usage, so a run shows
what it waited for.
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass
from typing import Any, cast

import aiohttp

from ..errors import AgentError, ConfigError
from ..turns import Usage
from .pricing import PriceTable, price_for

__all__ = ["ChatClient", "ChatResult", "ChatSettings", "api_key_from_env"]

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


def api_key_from_env() -> str | None:
    """TOLOKAFORGE_LLM_API_KEY, else OPENAI_API_KEY."""
    return os.environ.get("TOLOKAFORGE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")


@dataclass(frozen=True)
class ChatSettings:
    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = None
    temperature: float | None = None
    timeout_s: float = 120.0
    max_retries: int = 5
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
        self._session = session
        self._price = price_for(prices, settings.model)
        self._url = settings.base_url.rstrip("/") + "/chat/completions"

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatResult:
        body: dict[str, Any] = {"model": self.settings.model, "messages": messages}
        if tools:
            body["tools"] = tools
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        usage = Usage()
        attempt = 0
        while True:
            message, failure, wait = await self._post(body, usage)
            if message is not None:
                return ChatResult(message=message, usage=usage)
            if attempt >= self.settings.max_retries:
                raise AgentError(f"chat completion failed after {attempt + 1} attempts: {failure}")
            delay = wait if wait is not None else self._backoff(attempt)
            usage.llm_retries += 1
            usage.retry_log.append(f"{failure}; retried after {delay:.2f}s")
            attempt += 1
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        # Full jitter keeps many concurrent trials from retrying in lockstep.
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)

    async def _post(
        self, body: dict[str, Any], usage: Usage
    ) -> tuple[dict[str, Any] | None, str | None, float | None]:
        """One request: (message, None, None), or (None, why, server-requested wait) for a retryable failure."""
        headers = {"Authorization": f"Bearer {self.settings.api_key}"}
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_s)
        try:
            async with self._session.post(self._url, json=body, headers=headers, timeout=timeout) as response:
                if response.status in _RETRYABLE_STATUS:
                    why = f"HTTP {response.status} {response.reason or ''}".strip()
                    return None, why, _retry_after(response)
                if response.status >= 400:
                    text = (await response.text())[:500]
                    raise AgentError(f"chat completion refused: HTTP {response.status}: {text}")
                payload = await response.json(content_type=None)
        except TimeoutError:
            return None, f"timeout after {self.settings.timeout_s:.0f}s", None
        except aiohttp.ClientError as error:
            raise AgentError(f"chat completion request failed: {type(error).__name__}: {error}") from error
        except ValueError as error:
            raise AgentError(f"chat completion answered with a body that is not JSON: {error}") from error
        message = _first_message(payload)
        self._count(payload, usage)
        return message, None, None

    def _count(self, payload: Any, usage: Usage) -> None:
        raw: Any = cast(dict[str, Any], payload).get("usage")
        counts = cast(dict[str, Any], raw or {})
        prompt = int(counts.get("prompt_tokens") or 0)
        completion = int(counts.get("completion_tokens") or 0)
        usage.prompt_tokens += prompt
        usage.completion_tokens += completion
        usage.llm_calls += 1
        usage.cost_usd = self._price.cost(prompt, completion) if self._price is not None else None


def _retry_after(response: aiohttp.ClientResponse) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP-date: fall back to our own backoff rather than parse clocks


def _first_message(payload: Any) -> dict[str, Any]:
    try:
        message = cast(dict[str, Any], payload)["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as error:
        raise AgentError(f"chat completion has no choices[0].message: {str(payload)[:300]}") from error
    if not isinstance(message, dict):
        raise AgentError("chat completion choices[0].message is not an object")
    return cast(dict[str, Any], message)
