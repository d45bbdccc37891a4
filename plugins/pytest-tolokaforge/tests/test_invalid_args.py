"""Schema-invalid arguments derived from a tool's schema, each confirmed invalid by the schema."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from pytest_tolokaforge.invalid_args import UNDECLARED_PROPERTY, invalid_arguments


def _derived(schema: dict[str, Any]) -> tuple[dict[str, Any], str]:
    found = invalid_arguments(schema)
    assert found is not None
    assert not Draft202012Validator(schema).is_valid(found[0])  # pyright: ignore[reportUnknownMemberType]
    return found


def test_a_wrong_type_for_the_first_required_property() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["order_id", "n"],
    }
    arguments, how = _derived(schema)
    assert how == "wrong type for required property 'order_id'"
    assert not isinstance(arguments["order_id"], str)


def test_an_enum_property_gets_a_value_outside_the_enum() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"reason": {"enum": ["a", "b"]}},
        "required": ["reason"],
    }
    arguments, _ = _derived(schema)
    assert arguments["reason"] not in ("a", "b")


def test_an_untyped_required_property_falls_back_to_the_missing_property() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"anything": {}}, "required": ["anything"]}
    assert _derived(schema) == ({}, "missing required properties (anything)")


def test_no_required_properties_and_closed_object_gets_an_undeclared_property() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    assert _derived(schema) == (
        {UNDECLARED_PROPERTY: 1},
        "an undeclared property (additionalProperties is false)",
    )


def test_an_optional_typed_property_gets_a_wrong_type() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"limit": {"type": "integer"}}}
    arguments, how = _derived(schema)
    assert how == "wrong type for property 'limit'" and not isinstance(arguments["limit"], int)


def test_a_schema_that_accepts_every_object_yields_nothing() -> None:
    assert invalid_arguments({"type": "object"}) is None
    assert invalid_arguments({"type": "object", "properties": {"free": {}}}) is None


def test_an_invalid_schema_yields_nothing_the_load_check_reports_it() -> None:
    assert invalid_arguments({"type": "object", "properties": {"x": {"type": "strin"}}}) is None
