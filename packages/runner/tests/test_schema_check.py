"""The compiled argument check only ever accepts what JSON Schema 2020-12 (jsonschema) accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tolokaforge.runner.tools.schema_check import SchemaCheck

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False) | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abc"), children, max_size=3)
    ),
    max_leaves=8,
)
_types = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])


def _leaf_keywords() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": _types | st.lists(_types, min_size=1, max_size=3, unique=True),
            "minimum": st.integers(-3, 3),
            "maximum": st.integers(-3, 3),
            "exclusiveMinimum": st.integers(-3, 3),
            "exclusiveMaximum": st.integers(-3, 3),
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "pattern": st.sampled_from(["^a", "b$", "[0-9]"]),
            "minItems": st.integers(0, 3),
            "maxItems": st.integers(0, 3),
            "enum": st.lists(st.text(max_size=3), min_size=1, max_size=3) | st.just([1, True, None]),
            "const": st.text(max_size=3) | st.just(1) | st.just(False),
            "description": st.text(max_size=5),
            "default": _json,
            "format": st.just("email"),
            "uniqueItems": st.booleans(),
        },
    )


def _composite(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    optional: dict[str, st.SearchStrategy[Any]] = {
        "type": st.just("object"),
        "properties": st.dictionaries(st.sampled_from("abc"), children, max_size=3),
        "required": st.lists(st.sampled_from("abc"), max_size=3, unique=True),
        "additionalProperties": st.booleans() | children,
        "items": children | st.lists(children, max_size=2),
        "prefixItems": st.lists(children, max_size=2),
        "anyOf": st.lists(children, min_size=1, max_size=2),
    }
    return st.fixed_dictionaries({}, optional=optional)


_schemas: st.SearchStrategy[dict[str, Any]] = st.recursive(_leaf_keywords(), _composite, max_leaves=6)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schemas, instances=st.lists(_json, min_size=1, max_size=5))
def test_what_the_compiled_check_accepts_jsonschema_accepts(
    schema: dict[str, Any], instances: list[Any]
) -> None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        assume(False)  # the runner refuses such a schema at registration
    check = SchemaCheck.of(Draft202012Validator(schema))
    for instance in instances:
        full_ok = Draft202012Validator(schema).is_valid(instance)  # pyright: ignore[reportUnknownMemberType]
        assert (not check.errors(instance)) == full_ok  # the check's verdict is always jsonschema's
        if check.fast is not None:
            try:
                check.fast(instance)
            except Exception:
                continue
            assert full_ok, f"compiled check accepted {instance!r} against {schema!r}"


def test_a_typical_tool_schema_gets_the_compiled_check_and_its_errors_are_jsonschemas() -> None:
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string", "pattern": "^O-"}, "count": {"type": "integer"}},
        "required": ["order_id"],
        "additionalProperties": False,
    }
    check = SchemaCheck.of(Draft202012Validator(schema))
    assert check.fast is not None
    assert check.errors({"order_id": "O-1", "count": 2}) == []
    assert check.errors({"order_id": "O-1", "count": 2.0}) == []  # 2020-12: an integral float is an integer
    (error,) = check.errors({"order_id": "X", "count": 1})
    assert error.message == "'X' does not match '^O-'"


def test_defaults_are_never_written_into_the_arguments() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}
    check = SchemaCheck.of(Draft202012Validator(schema))
    arguments: dict[str, Any] = {}
    assert check.fast is not None and check.errors(arguments) == [] and arguments == {}


def test_keywords_that_differ_between_drafts_leave_jsonschema_alone() -> None:
    for schema in (
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"type": "array", "items": [{"type": "string"}]},
        {"enum": [1, True]},
        {"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}},
    ):
        assert SchemaCheck.of(Draft202012Validator(schema)).fast is None, schema
