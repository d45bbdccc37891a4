"""The one chat client (OpenAI-compatible or Anthropic): the host's agent and simulated user and the runner's LLM judge use it."""

from __future__ import annotations

from .chat import (
    RETRYABLE_STATUS,
    ChatCompletions,
    ChatEndpoint,
    ChatError,
    ChatExhausted,
    ChatRefused,
    ChatUnavailable,
    ChatUnreachable,
    Completion,
    Provider,
    split_model,
)

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
