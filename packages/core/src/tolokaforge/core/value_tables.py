"""Top-level state values that are not tables, kept in a store that holds only tables.

A public-style ``json_db`` may hold plain values beside its tables (``{"counter": 0, "log": ["a"]}``).
The DB service stores tables of records, and its contract stays that way: such a value is stored as a
*value table*, a keyed table with the one record ``{VALUE_KEY: {"value": v}}``. The store, snapshots,
resets and the stable hash treat it like any table (so the hash covers the value); only the runner's
readers -- python tools' ``data``, JSONPath checks, custom checks, synced tool servers -- see ``v``
itself, through :func:`present`. Tools write ``v`` back; the runner turns the new value into one
upsert of that record (see ``tolokaforge.runner.state.cow``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

__all__ = [
    "VALUE_KEY",
    "is_table_shaped",
    "is_value_table",
    "present",
    "value_of",
    "value_table",
    "wrap_values",
]

VALUE_KEY = "$value"
"""The one key of a value table. A pack's own keyed table whose only key is this one would read as a
plain value, so the loader refuses such a table by name."""


def is_table_shaped(value: Any) -> bool:
    """A list of records, or records by key (records are JSON objects): what the store keeps as is."""
    if type(value) is list:
        records: Any = cast(list[Any], value)
    elif type(value) is dict:
        records = cast(dict[str, Any], value).values()
    else:
        return False
    # map/set run in C: checking 100k records costs about a millisecond.
    return set(map(type, records)) <= {dict}


def value_table(value: Any) -> dict[str, Any]:
    """The table a plain top-level value is stored as."""
    return {VALUE_KEY: {"value": value}}


def is_value_table(table: Any) -> bool:
    """Whether ``table`` is a stored plain value (O(1): a keyed table with exactly the one marker key)."""
    return type(table) is dict and len(cast(dict[str, Any], table)) == 1 and VALUE_KEY in table


def value_of(table: Any) -> Any:
    """The plain value a value table holds (``table`` must be one)."""
    return cast(dict[str, Any], table)[VALUE_KEY]["value"]


def wrap_values(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with every top-level value that is not table-shaped stored as a value table."""
    return {name: value if is_table_shaped(value) else value_table(value) for name, value in state.items()}


def present(tables: Mapping[str, Any]) -> dict[str, Any]:
    """The state as its readers see it: value tables replaced by their values, tables shared as they are."""
    return {name: value_of(table) if is_value_table(table) else table for name, table in tables.items()}
