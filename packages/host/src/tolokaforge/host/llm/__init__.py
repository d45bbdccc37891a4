"""The chat-completions client shared by the llm agent and the LLM user, its wire format and prices."""

from __future__ import annotations

from .chat import ChatClient, ChatResult, ChatSettings, api_key_from_env
from .pricing import DEFAULT_PRICES, Price, PriceTable, load_prices
from .session import llm_session

__all__ = [
    "DEFAULT_PRICES",
    "ChatClient",
    "ChatResult",
    "ChatSettings",
    "Price",
    "PriceTable",
    "api_key_from_env",
    "llm_session",
    "load_prices",
]
