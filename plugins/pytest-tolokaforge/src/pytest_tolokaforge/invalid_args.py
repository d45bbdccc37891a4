"""Derive arguments a tool's schema rejects, to test that the runner answers INVALID_ARGUMENTS.

Tried in order, each confirmed locally against the schema (Draft 2020-12) before it is used:

1. a wrong type for the first required property (``{"order_id": 12345}``);
2. an object missing every required property (``{}``);
3. an undeclared property, when ``additionalProperties`` is false;
4. a wrong type for any declared property.

A schema that accepts every candidate (``{"type": "object"}`` and nothing else) yields nothing; the
taxonomy check says so rather than skipping silently.
"""

from __future__ import annotations

from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

__all__ = ["UNDECLARED_PROPERTY", "invalid_arguments"]

UNDECLARED_PROPERTY = "tolokaforge_undeclared_property"
# Values of every JSON type: one of them is the wrong type for any typed property.
_WRONG_VALUES: tuple[Any, ...] = (
    {"tolokaforge": "not this"},
    ["tolokaforge"],
    12345,
    "tolokaforge-not-this",
    True,
    None,
)


def invalid_arguments(parameters: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Arguments ``parameters`` rejects and how they were made; None when none can be derived."""
    try:
        validator = Draft202012Validator(parameters)
        Draft202012Validator.check_schema(parameters)
    except SchemaError:
        return None  # the load check reports the schema itself
    properties = cast(dict[str, Any], parameters.get("properties") or {})
    required = [str(name) for name in cast(list[Any], parameters.get("required") or [])]

    def rejected(arguments: dict[str, Any]) -> bool:
        return not validator.is_valid(arguments)  # pyright: ignore[reportUnknownMemberType]

    if required:
        name = required[0]
        for value in _WRONG_VALUES:
            arguments = {name: value}
            if rejected(arguments) and _wrong_for(properties.get(name), value):
                return arguments, f"wrong type for required property {name!r}"
        if rejected({}):
            return {}, f"missing required properties ({', '.join(required)})"
    if parameters.get("additionalProperties") is False:
        arguments = {UNDECLARED_PROPERTY: 1}
        if rejected(arguments):
            return arguments, "an undeclared property (additionalProperties is false)"
    for name, schema in properties.items():
        for value in _WRONG_VALUES:
            arguments = {name: value}
            if _wrong_for(schema, value) and rejected(arguments):
                return arguments, f"wrong type for property {name!r}"
    return None


def _wrong_for(schema: Any, value: Any) -> bool:
    """True when ``value`` alone fails ``schema`` (the property's own subschema), so the rejection is its."""
    if not isinstance(schema, dict):
        return True
    try:
        return not Draft202012Validator(cast(dict[str, Any], schema)).is_valid(value)  # pyright: ignore[reportUnknownMemberType]
    except SchemaError:
        return False
