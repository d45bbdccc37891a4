"""Does every model of the run answer, with the run's key? Asked once, before any trial.

Each configured model (the agent's, the simulated user's, the judge's) gets one authenticated call:
a one-line prompt, no tools, at most one token back (``max_completion_tokens`` for OpenAI-compatible
models, which reasoning models accept where they refuse ``max_tokens``; ``max_tokens`` for Anthropic).
A reply cut at that token is still a completion: the key, the model and the endpoint are proven.
Roles that share a model, endpoint and key share the call. The calls run concurrently through the
chat client the trials use, with the run's timeout and retries, so a 429 at start is waited out as a
trial's would be.

A refusal (a 401/403 for the key, a 404 or 400 for a model the provider does not serve) raises
:class:`ModelRefusedError`; no answer (refused connection, unresolvable name, nothing within the
timeout, 429/5xx past the retries) raises :class:`EndpointUnreachableError`. Either names each failing
role, model and endpoint with the provider's reason, secrets redacted, and stops the run before its
output folder exists.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp

from tolokaforge.core.llm import (
    ChatCompletions,
    ChatEndpoint,
    ChatError,
    ChatExhausted,
    ChatUnreachable,
    split_model,
)
from tolokaforge.core.models import JudgeModelConfig

from ..errors import EndpointUnreachableError, ModelRefusedError

__all__ = ["PREFLIGHT_MESSAGES", "ModelCheck", "check_models", "judge_check"]

PREFLIGHT_MESSAGES: list[dict[str, str]] = [{"role": "user", "content": "Reply with the word OK."}]
"""What the one call per model sends."""


@dataclass(frozen=True)
class ModelCheck:
    """One role's model as the run will call it."""

    role: str
    """How the user knows it: ``agent``, ``user simulator``, ``judge``."""
    model: str
    """As the user wrote it (an ``anthropic/`` prefix selects the Messages API)."""
    base_url: str
    api_key: str = field(repr=False)
    timeout_s: float
    max_retries: int


def judge_check(
    judge: JudgeModelConfig | None, environ: Mapping[str, str] | None = None
) -> ModelCheck | None:
    """The judge's check, with the key the runner would read (``api_key_env``, first set wins).

    None for no judge, the mock judge (it has no network), or no key in this environment: a remote
    runner reads the key from its own, which the host cannot see.
    """
    if judge is None or judge.is_mock:
        return None
    env = os.environ if environ is None else environ
    key = next((env[name] for name in judge.api_key_env if env.get(name)), None)
    if key is None:
        return None
    return ModelCheck(
        "judge", judge.model, judge.base_url, key, judge.request_timeout_s, judge.max_http_retries
    )


@dataclass(frozen=True)
class _Failure:
    line: str
    unreachable: bool


async def check_models(
    session: aiohttp.ClientSession,
    checks: Sequence[ModelCheck],
    redact: Callable[[str], str] | None = None,
) -> None:
    """One completion per distinct (model, endpoint, key); raises naming every one that failed.

    The message has the checks' keys replaced (a provider may quote the key it refused), then goes
    through ``redact`` for every other secret the caller knows.
    """
    grouped: dict[tuple[str, str, str], list[ModelCheck]] = {}
    for check in checks:
        grouped.setdefault((check.model, check.base_url.rstrip("/"), check.api_key), []).append(check)
    found = await asyncio.gather(*(_check(session, group) for group in grouped.values()))
    failures = [failure for failure in found if failure is not None]
    if not failures:
        return
    message = "; ".join(failure.line for failure in failures)
    for key in {check.api_key for check in checks if check.api_key}:
        message = message.replace(key, "[redacted]")
    if redact is not None:
        message = redact(message)
    if all(failure.unreachable for failure in failures):
        raise EndpointUnreachableError(message)
    raise ModelRefusedError(message)


async def _check(session: aiohttp.ClientSession, group: list[ModelCheck]) -> _Failure | None:
    first = group[0]
    provider, model = split_model(first.model)
    endpoint = ChatEndpoint(
        model=model,
        provider=provider,
        base_url=first.base_url,
        api_key=first.api_key,
        max_tokens=1,
        timeout_s=first.timeout_s,
        max_retries=first.max_retries,
    )
    roles = " and ".join(dict.fromkeys(check.role for check in group))
    try:
        await ChatCompletions(endpoint, session).complete(PREFLIGHT_MESSAGES, [])
    except ChatError as error:
        unreachable = isinstance(error, ChatUnreachable | ChatExhausted)
        return _Failure(
            f"preflight: the {roles} model {first.model!r} at {first.base_url} {error}", unreachable
        )
    return None
