"""Token prices per model, in USD per million tokens, and the cost of one call.

One table covers both providers, keyed by the model name as ``--model`` takes it: OpenAI's models bare
(``gpt-4o``; ``openai/gpt-4o`` finds the same row) and Anthropic's with their prefix
(``anthropic/claude-sonnet-4-5``). The built-in table is a small default; ``load_prices`` merges a YAML
file over it (``{model: {prompt: 2.5, completion: 10.0}}``, keys written either way) so a run prices
whatever endpoint it talks to. A model with no price costs None, never 0.0: an unknown cost must not
read as a free one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from ..errors import ConfigError

__all__ = ["DEFAULT_PRICES", "Price", "PriceTable", "load_prices"]


@dataclass(frozen=True)
class Price:
    prompt_per_million: float
    completion_per_million: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.prompt_per_million + completion_tokens * self.completion_per_million
        ) / 1e6


PriceTable = dict[str, Price]

DEFAULT_PRICES: PriceTable = {
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1-nano": Price(0.1, 0.4),
    "o4-mini": Price(1.1, 4.4),
    "anthropic/claude-opus-4-5": Price(5.0, 25.0),
    "anthropic/claude-opus-4-1": Price(15.0, 75.0),
    "anthropic/claude-opus-4": Price(15.0, 75.0),
    "anthropic/claude-sonnet-4-5": Price(3.0, 15.0),
    "anthropic/claude-sonnet-4": Price(3.0, 15.0),
    "anthropic/claude-3-7-sonnet": Price(3.0, 15.0),
    "anthropic/claude-haiku-4-5": Price(1.0, 5.0),
    "anthropic/claude-3-5-haiku": Price(0.8, 4.0),
}


def _key(model: str) -> str:
    # A bare name is the OpenAI-compatible provider's, so "openai/" adds nothing to look up.
    return model.removeprefix("openai/")


def price_for(table: PriceTable, model: str) -> Price | None:
    """The model's price; a dated variant (``gpt-4o-2024-08-06``) falls back to its family's."""
    model = _key(model)
    if model in table:
        return table[model]
    family = max((name for name in table if model.startswith(name + "-")), key=len, default=None)
    return table[family] if family is not None else None


def load_prices(path: Path | None) -> PriceTable:
    table = dict(DEFAULT_PRICES)
    if path is None:
        return table
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        for model, entry in cast(dict[str, dict[str, Any]], raw or {}).items():
            table[_key(str(model))] = Price(float(entry["prompt"]), float(entry["completion"]))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise ConfigError(
            f"price table {path}: expected {{model: {{prompt, completion}}}}: {error}"
        ) from error
    return table
