"""An OpenAI-compatible chat-completions client with tool calling, on aiohttp.

Only what may succeed on a second try is retried: HTTP 429, HTTP 5xx and timeouts, with exponential
backoff (``Retry-After`` honoured when the server sends it), at most ``max_retries`` times; each request
waits at most ``timeout_s`` (``--llm-timeout`` / ``--llm-max-retries``), so a hung endpoint costs at
most (max_retries + 1) x timeout_s per turn, not minutes per try. Every other failure — 4xx, a connection
refused, a body that is not a completion — raises :class:`AgentError` at once, because repeating it
spends time and quota for the same answer. Each retry is logged on the trial's usage, so a run shows
what it waited for; a turn that gives up carries that usage on its :class:`AgentError`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
import orjson

from tolokaforge.core.retry import Backoff, RetryPolicy, retry_async

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

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


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


class _RetryableFailure(Exception):
    """A failure worth another try (429, 5xx, a timeout); ``wait_s`` is the server's Retry-After, if any."""

    def __init__(self, why: str, wait_s: float | None) -> None:
        super().__init__(why)
        self.wait_s = wait_s


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

        async def once() -> dict[str, Any]:
            message, failure, wait = await self._post(body, usage)
            if message is None:
                raise _RetryableFailure(failure or "no answer", wait)
            return message

        def count_retry(error: BaseException, attempt: int, wait_s: float) -> None:
            usage.llm_retries += 1
            usage.retry_log.append(f"{error}; retried after {wait_s:.2f}s")

        policy = RetryPolicy(
            retry_if=lambda error: isinstance(error, _RetryableFailure),
            max_attempts=self.settings.max_retries + 1,
            # Jitter keeps many concurrent trials from retrying in lockstep; a server's Retry-After wins.
            backoff=Backoff(self.settings.backoff_base_s, self.settings.backoff_max_s, jitter=True),
            wait_hint=lambda error: error.wait_s if isinstance(error, _RetryableFailure) else None,
        )
        try:
            message = await retry_async(once, policy, on_retry=count_retry)
        except _RetryableFailure as failure:
            usage.retry_log.append(f"{failure}; gave up (no retries left)")
            retries = usage.llm_retries
            raise AgentError(
                f"chat completion failed after {retries + 1} attempt(s) "
                f"({retries} retries, --llm-max-retries {self.settings.max_retries}): {failure}",
                usage,
            ) from failure
        return ChatResult(message=message, usage=usage)

    async def _post(
        self, body: dict[str, Any], usage: Usage
    ) -> tuple[dict[str, Any] | None, str | None, float | None]:
        """One request: (message, None, None), or (None, why, server-requested wait) for a retryable failure."""
        headers = {"Authorization": f"Bearer {self.settings.api_key}", "Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_s)
        try:
            # orjson: the body carries the whole conversation and the tools' schemas every turn, and the
            # standard encoder was a tenth of the host's CPU at 256 concurrent trials (llm_bound.py).
            data = orjson.dumps(body)
            async with self._session.post(self._url, data=data, headers=headers, timeout=timeout) as response:
                if response.status in _RETRYABLE_STATUS:
                    why = f"HTTP {response.status} {response.reason or ''}".strip()
                    return None, why, _retry_after(response)
                if response.status >= 400:
                    text = (await response.text())[:500]
                    raise AgentError(f"chat completion refused: HTTP {response.status}: {text}", usage)
                payload = orjson.loads(await response.read())
        except TimeoutError:
            return None, f"no answer within --llm-timeout {self.settings.timeout_s:g}s", None
        except aiohttp.ClientError as error:
            raise AgentError(
                f"chat completion request failed: {type(error).__name__}: {error}", usage
            ) from error
        except ValueError as error:
            raise AgentError(
                f"chat completion answered with a body that is not JSON: {error}", usage
            ) from error
        message = _first_message(payload)
        self._count(payload, usage)
        return message, None, None

    def _count(self, payload: Any, usage: Usage) -> None:
        raw: Any = cast(dict[str, Any], payload).get("usage")
        counts = cast(dict[str, Any], raw or {})
        prompt = int(counts.get("prompt_tokens") or 0)
        completion = int(counts.get("completion_tokens") or 0)
        cost = self._price.cost(prompt, completion) if self._price is not None else None
        usage.record_call(self.settings.model, prompt, completion, cost)


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
