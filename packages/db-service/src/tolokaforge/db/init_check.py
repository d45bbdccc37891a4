"""InitRequest bodies checked without walking every record in Python.

The compiled validator (spec.py) checks a list table's records one by one in generated Python: about
2.5 ms per 10k records, a fifth of a first RegisterTrial's own work at that size, spent confirming
what the runner's parser already knows (each record is a JSON object). What the contract asks of a
record and of a record key is small (``ListTable``, ``KeyedTable``, ``RecordKey`` in the OpenAPI
document): "an object", "a string of 1..256 characters". Those are checked here with ``map`` and
``set``, which run in C, and the rest of the body (table names, schemas, unstable fields, lease) by the
compiled validator with every table emptied.

This is a shortcut that only ever accepts: anything it does not accept goes through the full
validation, which decides and says why. It reads its limits from the contract and turns itself off
when the contract asks more of a record or a key than it knows how to check (tests/test_init_check.py
proves it accepts nothing the full validation refuses).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, cast

from tolokaforge.core.fast_schema import SchemaRefusal
from tolokaforge.db.spec import ApiSpec

__all__ = ["InitCheck"]

_RECORD = {"type": "object"}
_KEY_KEYWORDS = {"type", "minLength", "maxLength", "description"}


class InitCheck:
    """``validate(body)``: raise ValidationFailedError unless ``body`` is a valid InitRequest."""

    def __init__(self, spec: ApiSpec) -> None:
        self._spec = spec

    def validate(self, body: Any) -> None:
        if not self._accepts(body):
            self._spec.validate("InitRequest", body)

    @cached_property
    def _key_lengths(self) -> tuple[int, int] | None:
        """The record key's length bounds, when the contract's record and key schemas are the simple
        ones this shortcut understands; None turns the shortcut off."""
        schemas = cast(dict[str, Any], self._spec.document["components"]["schemas"])
        record = _without_description(schemas["ListTable"].get("items", {}))
        keyed = schemas["KeyedTable"]
        if record != _RECORD or _without_description(keyed.get("additionalProperties", {})) != _RECORD:
            return None
        if keyed.get("propertyNames") != {"$ref": "#/components/schemas/RecordKey"}:
            return None
        key = cast(dict[str, Any], schemas["RecordKey"])
        if key.get("type") != "string" or not set(key) <= _KEY_KEYWORDS:
            return None
        return int(key.get("minLength", 0)), int(key.get("maxLength", 2**63))

    def _accepts(self, body: Any) -> bool:
        bounds = self._key_lengths
        if bounds is None or type(body) is not dict:
            return False
        tables = cast(dict[str, Any], body).get("tables")
        if type(tables) is not dict:
            return False
        emptied: dict[str, Any] = {}
        for name, table in cast(dict[Any, Any], tables).items():
            if type(table) is list:
                if not set(map(type, cast(list[Any], table))) <= {dict}:
                    return False
                emptied[name] = []
            elif type(table) is dict:
                keyed = cast(dict[Any, Any], table)
                if not set(map(type, keyed.values())) <= {dict} or not set(map(type, keyed)) <= {str}:
                    return False
                if keyed and not (bounds[0] <= min(map(len, keyed)) and max(map(len, keyed)) <= bounds[1]):
                    return False
                emptied[name] = {}
            else:
                return False
        try:
            self._spec.fast_validator("InitRequest")({**body, "tables": emptied})
        except SchemaRefusal:
            return False
        return True


def _without_description(schema: Any) -> Any:
    if type(schema) is not dict:
        return schema
    return {key: value for key, value in cast(dict[str, Any], schema).items() if key != "description"}
