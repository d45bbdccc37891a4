"""The one chat client, with tool calling, on aiohttp: OpenAI-compatible chat completions or Anthropic's
Messages API, chosen by :attr:`ChatEndpoint.provider` (``split_model`` reads it off a model name's
``openai/`` or ``anthropic/`` prefix; a bare name is OpenAI-compatible). Callers speak chat-completions
messages either way; ``anthropic.py`` translates. A ``tool`` message may carry the images its call
showed the model (``images``, images.py), placed as each provider accepts them.

Only what may succeed on a second try is retried: HTTP 429 and 5xx (Anthropic's 529, overloaded, too)
and a request with no answer within ``timeout_s`` (:class:`ChatUnavailable`), at most ``max_retries``
times, waiting as ``backoff`` says unless the server's ``Retry-After`` names the wait. Running out of tries raises :class:`ChatExhausted`.
Anything else -- a 4xx, a connection refused, a body that is not a completion -- raises
:class:`ChatRefused` at once, because repeating it spends time and quota for the same answer.

Errors carry sentences with no subject (``refused the request: HTTP 401: ...``): each caller names the
party that failed in its own words (the host's agent, the runner's judge) and raises its own error type.

The body goes out as orjson bytes: it carries the whole conversation and the tools' schemas every turn,
and the standard encoder was a tenth of the host's CPU at 256 concurrent trials (tools/bench/llm_bound.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import aiohttp
import orjson

from ..retry import Backoff, RetryPolicy, retry_async
from .anthropic import ANTHROPIC_VERSION, completion_parts, messages_body
from .images import openai_messages

__all__ = [
    "RETRYABLE_STATUS",
    "ChatCompletions",
    "ChatEndpoint",
    "ChatError",
    "ChatExhausted",
    "ChatRefused",
    "ChatUnavailable",
    "ChatUnreachable",
    "Completion",
    "Provider",
    "split_model",
]

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504, 529})

Provider = Literal["openai", "anthropic"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic")


def split_model(name: str) -> tuple[Provider, str]:
    """``anthropic/claude-x`` -> (anthropic, claude-x); ``openai/gpt-4o`` and ``gpt-4o`` -> (openai, gpt-4o).

    Only the first segment is read, so ``openai/anthropic/claude-x`` is the OpenAI-compatible
    endpoint's (a router's) model ``anthropic/claude-x``.
    """
    head, _, rest = name.partition("/")
    if rest and head == "anthropic":
        return "anthropic", rest
    if rest and head == "openai":
        return "openai", rest
    return "openai", name


# Jitter keeps many concurrent callers from retrying in lockstep; a server's Retry-After wins anyway.
_BACKOFF = Backoff(0.5, 30.0, jitter=True)


@dataclass(frozen=True)
class ChatEndpoint:
    """Where the model is served and how long one completion may take, in tries and seconds."""

    model: str
    base_url: str
    api_key: str
    temperature: float | None = None
    seed: int | None = None
    """OpenAI-compatible only: the Messages API has no seed, so an anthropic endpoint refuses one."""
    max_tokens: int | None = None
    """Sent as ``max_completion_tokens`` (OpenAI) or ``max_tokens`` (Anthropic, which requires one)."""
    reasoning_effort: str | None = None
    """OpenAI's ``reasoning_effort`` (e.g. low, medium, high); refused for an anthropic endpoint."""
    provider: Provider = "openai"
    timeout_s: float = 60.0
    """The budget of one request; a completion may take (max_retries + 1) x timeout_s plus the waits."""
    max_retries: int = 2
    backoff: Backoff = _BACKOFF

    def __post_init__(self) -> None:
        if self.provider == "anthropic":
            if self.seed is not None:
                raise ValueError("Anthropic's Messages API has no seed: remove the seed for this model")
            if self.reasoning_effort is not None:
                raise ValueError(
                    "reasoning effort is sent to OpenAI-compatible models only: remove it for this model"
                )


@dataclass(frozen=True)
class Completion:
    message: dict[str, Any]
    """choices[0].message: ``content`` and optionally ``tool_calls``."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0


class ChatError(Exception):
    """No completion; the message is a sentence with no subject, for the caller to prefix."""


class ChatRefused(ChatError):
    """A failure another try would repeat: a 4xx, an unreachable endpoint, a body that is not a completion."""

    def __init__(self, why: str, status: int | None = None) -> None:
        super().__init__(why)
        self.status = status
        """The HTTP status of a refusal the server answered (401, 404, ...); None for any other failure."""


class ChatUnreachable(ChatRefused):
    """No HTTP answer at all: the connection was refused, the name did not resolve, TLS failed."""


class ChatUnavailable(ChatError):
    """A failure worth another try: HTTP 429 or 5xx (``status``), or no answer in time (``status`` None)."""

    def __init__(self, why: str, status: int | None, wait_s: float | None) -> None:
        super().__init__(why)
        self.status = status
        self.wait_s = wait_s
        """The server's Retry-After, when it sent one it means in seconds."""

    @property
    def timed_out(self) -> bool:
        return self.status is None


class ChatExhausted(ChatError):
    """Every try failed with :class:`ChatUnavailable`; ``last`` is the final one."""

    def __init__(self, attempts: int, last: ChatUnavailable) -> None:
        super().__init__(f"failed after {attempts} attempt(s): {last}")
        self.attempts = attempts
        self.last = last


OnRetry = Callable[[ChatUnavailable, float], None]
"""Told of each retryable failure before its wait (the error, the wait in seconds)."""


def _is_unavailable(error: BaseException) -> bool:
    return isinstance(error, ChatUnavailable)


def _wait_hint(error: BaseException) -> float | None:
    return error.wait_s if isinstance(error, ChatUnavailable) else None


class ChatCompletions:
    """One endpoint's client; ``session`` is the caller's (one connection pool shared as it sees fit)."""

    def __init__(self, endpoint: ChatEndpoint, session: aiohttp.ClientSession) -> None:
        self.endpoint = endpoint
        self._session = session
        base = endpoint.base_url.rstrip("/")
        if endpoint.provider == "anthropic":
            self._url = base + "/v1/messages"
            self._headers = {
                "x-api-key": endpoint.api_key,
                "anthropic-version": ANTHROPIC_VERSION,
                "Content-Type": "application/json",
            }
        else:
            self._url = base + "/chat/completions"
            self._headers = {
                "Authorization": f"Bearer {endpoint.api_key}",
                "Content-Type": "application/json",
            }
        self._timeout = aiohttp.ClientTimeout(total=endpoint.timeout_s)
        self._policy = RetryPolicy(
            retry_if=_is_unavailable,
            max_attempts=endpoint.max_retries + 1,
            backoff=endpoint.backoff,
            wait_hint=_wait_hint,
        )

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_retry: OnRetry | None = None
    ) -> Completion:
        """The model's next message; raises :class:`ChatRefused` or :class:`ChatExhausted`."""
        data = orjson.dumps(self._body(messages, tools))
        retries = 0

        def count(error: BaseException, attempt: int, wait_s: float) -> None:
            nonlocal retries
            retries += 1
            if on_retry is not None:
                on_retry(cast(ChatUnavailable, error), wait_s)

        try:
            return await retry_async(lambda: self._post(data), self._policy, on_retry=count)
        except ChatUnavailable as last:
            raise ChatExhausted(retries + 1, last) from last

    def _body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        endpoint = self.endpoint
        if endpoint.provider == "anthropic":
            generation = {"temperature": endpoint.temperature, "max_tokens": endpoint.max_tokens}
            return messages_body(endpoint.model, messages, tools, generation)
        body: dict[str, Any] = {"model": endpoint.model, "messages": openai_messages(messages)}
        if tools:
            body["tools"] = tools
        optional = {
            "temperature": endpoint.temperature,
            "seed": endpoint.seed,
            "max_completion_tokens": endpoint.max_tokens,
            "reasoning_effort": endpoint.reasoning_effort,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        return body

    async def _post(self, data: bytes) -> Completion:
        try:
            async with self._session.post(
                self._url, data=data, headers=self._headers, timeout=self._timeout
            ) as response:
                if response.status in RETRYABLE_STATUS:
                    why = f"HTTP {response.status} {response.reason or ''}".strip()
                    raise ChatUnavailable(why, response.status, _retry_after(response))
                if response.status >= 400:
                    text = (await response.text())[:500]
                    raise ChatRefused(f"refused the request: HTTP {response.status}: {text}", response.status)
                payload = orjson.loads(await response.read())
        except TimeoutError as error:
            raise ChatUnavailable(f"no answer within {self.endpoint.timeout_s:g}s", None, None) from error
        except aiohttp.ClientError as error:
            raise ChatUnreachable(f"unreachable: {type(error).__name__}: {error}") from error
        except ValueError as error:
            raise ChatRefused(f"answered a body that is not JSON: {error}") from error
        if self.endpoint.provider == "anthropic":
            try:
                message, prompt, answered = completion_parts(payload)
            except ValueError as error:
                raise ChatRefused(str(error)) from error
            return Completion(message=message, prompt_tokens=prompt, completion_tokens=answered)
        return _completion(payload)


def _retry_after(response: aiohttp.ClientResponse) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP-date: fall back to our own backoff rather than parse clocks


def _completion(payload: Any) -> Completion:
    try:
        message = cast(dict[str, Any], payload)["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as error:
        raise ChatRefused(f"answered no choices[0].message: {str(payload)[:300]}") from error
    if not isinstance(message, dict):
        raise ChatRefused("answered a choices[0].message that is not an object")
    usage = cast(dict[str, Any], cast(dict[str, Any], payload).get("usage") or {})
    details = cast(dict[str, Any], usage.get("completion_tokens_details") or {})
    return Completion(
        message=cast(dict[str, Any], message),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        reasoning_tokens=int(details.get("reasoning_tokens") or 0),
    )
