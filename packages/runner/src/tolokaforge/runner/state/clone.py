"""Deep copies of JSON-shaped values, the one primitive every copy-on-write view relies on."""

from __future__ import annotations

import copy
from typing import Any, cast

__all__ = ["ATOMIC", "clone"]

ATOMIC: frozenset[type] = frozenset({str, int, float, bool, type(None)})
"""Immutable scalar types: shared, never copied."""


def clone(value: Any) -> Any:
    """A deep copy of a JSON-shaped value, fast for the dict/list/scalar case."""
    if type(value) in ATOMIC:  # pyright: ignore[reportUnknownArgumentType]
        return value
    if type(value) is dict:
        record = cast(dict[str, Any], value)
        return {key: item if type(item) in ATOMIC else clone(item) for key, item in record.items()}  # pyright: ignore[reportUnknownArgumentType]
    if type(value) is list:
        rows = cast(list[Any], value)
        return [item if type(item) in ATOMIC else clone(item) for item in rows]  # pyright: ignore[reportUnknownArgumentType]
    return copy.deepcopy(value)
