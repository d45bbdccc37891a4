"""Compiled validators: one per distinct schema and options, whoever asks and however the dict was built."""

from __future__ import annotations

import pytest

from tolokaforge.core.fast_schema import SchemaRefusal, compiled_validator

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}, "required": ["m"]}


def test_equal_schemas_built_apart_share_one_validator() -> None:
    reordered = {"required": ["m"], "properties": {"n": {"default": 1, "type": "integer"}}, "type": "object"}
    assert compiled_validator(SCHEMA) is compiled_validator(reordered)
    assert compiled_validator(SCHEMA) is not compiled_validator({**SCHEMA, "required": []})


def test_options_are_part_of_what_is_compiled() -> None:
    filling = compiled_validator(SCHEMA)
    plain = compiled_validator(SCHEMA, use_default=False)
    assert filling is not plain
    assert filling({"m": 0}) == {"m": 0, "n": 1}
    assert plain({"m": 0}) == {"m": 0}


def test_a_refused_value_raises_the_schema_refusal() -> None:
    with pytest.raises(SchemaRefusal, match="must contain"):
        compiled_validator(SCHEMA)({"n": 2})
    with pytest.raises(SchemaRefusal):
        compiled_validator(SCHEMA)({"m": 0, "n": "two"})
