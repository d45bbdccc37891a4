"""The judge's chat-completions client, built by the runner itself (the host's client stays host-side).

OpenAI-compatible, on aiohttp. Only what may succeed on a second try is retried -- HTTP 429 and 5xx
and timeouts, ``max_http_retries`` times with exponential backoff; anything else (a 4xx, a refused
connection, a body that is not a completion) raises :class:`JudgeFailed` at once. The API key comes
from the runner's own environment: the first variable of ``JudgeModelConfig.api_key_env`` that is set.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

import aiohttp

from tolokaforge.core.models import JudgeModelConfig

__all__ = ["ChatTurn", "HttpJudgeChat", "JudgeChat", "JudgeFailed", "resolve_api_key"]

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class JudgeFailed(Exception):
    """The judgement cannot finish: the judge is ERRORED with this message as the reason."""


@dataclass(frozen=True)
class ChatTurn:
    message: dict[str, Any]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0


class JudgeChat(Protocol):
    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatTurn: ...


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
    def __init__(self, config: JudgeModelConfig, api_key: str, session: aiohttp.ClientSession) -> None:
        self._config = config
        self._session = session
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self._url = config.base_url.rstrip("/") + "/chat/completions"

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatTurn:
        config = self._config
        body: dict[str, Any] = {"model": config.model, "messages": messages, "tools": tools}
        if config.temperature is not None:
            body["temperature"] = config.temperature
        failure = ""
        for attempt in range(config.max_http_retries + 1):
            if attempt:
                await asyncio.sleep(config.backoff_s * 2 ** (attempt - 1))
            turn, failure = await self._post(body)
            if turn is not None:
                return turn
        raise JudgeFailed(f"judge endpoint failed after {config.max_http_retries + 1} attempts: {failure}")

    async def _post(self, body: dict[str, Any]) -> tuple[ChatTurn | None, str]:
        """One request: (the turn, ""), or (None, why) for a failure worth another attempt."""
        timeout = aiohttp.ClientTimeout(total=self._config.request_timeout_s)
        try:
            async with self._session.post(
                self._url, json=body, headers=self._headers, timeout=timeout
            ) as response:
                if response.status in _RETRYABLE_STATUS:
                    return None, f"HTTP {response.status} {response.reason or ''}".strip()
                if response.status >= 400:
                    text = (await response.text())[:300]
                    raise JudgeFailed(f"judge endpoint refused the request: HTTP {response.status}: {text}")
                payload: Any = await response.json(content_type=None)
        except TimeoutError:
            return None, f"timeout after {self._config.request_timeout_s:g}s"
        except aiohttp.ClientError as error:
            raise JudgeFailed(f"judge endpoint unreachable: {type(error).__name__}: {error}") from error
        except ValueError as error:
            raise JudgeFailed(f"judge endpoint answered a body that is not JSON: {error}") from error
        return _turn(payload), ""


def _turn(payload: Any) -> ChatTurn:
    try:
        message = cast(dict[str, Any], payload)["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as error:
        raise JudgeFailed(f"judge endpoint answered no choices[0].message: {str(payload)[:200]}") from error
    if not isinstance(message, dict):
        raise JudgeFailed("judge endpoint answered a choices[0].message that is not an object")
    usage = cast(dict[str, Any], cast(dict[str, Any], payload).get("usage") or {})
    details = cast(dict[str, Any], usage.get("completion_tokens_details") or {})
    return ChatTurn(
        message=cast(dict[str, Any], message),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        reasoning_tokens=int(details.get("reasoning_tokens") or 0),
    )
