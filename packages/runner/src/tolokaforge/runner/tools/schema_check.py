"""A JSON Schema check on every call (a tool's arguments, a provider's output): 2020-12 by jsonschema,
with a compiled fast path.

jsonschema interprets a schema at every call: for a tool with a few typed properties that was about
5 % of a runner's CPU per ExecuteTool, and checking a provider's output (a list of 200 strings) about
0.5 ms. fastjsonschema compiles a schema to Python code, but speaks
draft-07, not 2020-12. So a schema gets the compiled check only when every keyword in it means the
same in both (:data:`FAST_KEYWORDS`; ``enum`` and ``const`` only over strings, where ``True == 1`` cannot
blur them), and even then the compiled check only ever *accepts*: arguments it refuses are checked
again by jsonschema, which decides and words the errors. A property test holds the two to that
(whatever the compiled check accepts, jsonschema accepts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from tolokaforge.core.fast_schema import Validator, compiled_validator

__all__ = ["FAST_KEYWORDS", "SchemaCheck"]

FAST_KEYWORDS = frozenset(
    {
        # annotations: no effect on validity in either draft
        "$schema",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        # assertions and applicators that draft-07 and 2020-12 define alike
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "enum",
        "const",
    }
)


def _fast_enough(schema: Any) -> bool:
    """Whether every keyword of ``schema``, at every depth, means the same in draft-07 and 2020-12."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    node = cast(dict[str, Any], schema)
    if not FAST_KEYWORDS.issuperset(node):
        return False
    if "enum" in node and not (
        isinstance(node["enum"], list) and all(isinstance(v, str) for v in cast(list[Any], node["enum"]))
    ):
        return False
    if "const" in node and not isinstance(node["const"], str):
        return False
    if "items" in node and not isinstance(node["items"], (dict, bool)):
        return False  # the array form is draft-07's tuple validation (2020-12: prefixItems)
    properties = node.get("properties", {})
    if not isinstance(properties, dict):
        return False
    nested = [*cast(dict[str, Any], properties).values()]
    nested += [node[key] for key in ("items", "additionalProperties") if key in node]
    return all(_fast_enough(child) for child in nested)


def _compile(schema: dict[str, Any]) -> Validator | None:
    if not _fast_enough(schema):
        return None
    draft07 = {key: value for key, value in schema.items() if key != "$schema"}
    try:
        # No defaults written into the arguments, no format checks (jsonschema checks none either).
        return compiled_validator(draft07, use_default=False, use_formats=False)
    except Exception:  # a schema it cannot compile: jsonschema alone, then
        return None


@dataclass(frozen=True, eq=False)
class SchemaCheck:
    validator: Draft202012Validator
    """The reference check (2020-12), and the one that words every error."""
    fast: Validator | None
    """The compiled check; None when the schema is not within :data:`FAST_KEYWORDS`."""

    @classmethod
    def of(cls, validator: Draft202012Validator) -> SchemaCheck:
        schema: Any = validator.schema
        if not isinstance(schema, dict):
            return cls(validator, None)
        return cls(validator, _compile(cast(dict[str, Any], schema)))

    @classmethod
    def of_schema(cls, schema: dict[str, Any]) -> SchemaCheck:
        return cls.of(Draft202012Validator(schema))

    def errors(self, arguments: Any) -> list[ValidationError]:
        """Every way ``arguments`` (any value) fail the schema (none: they pass), by path."""
        if self.fast is not None:
            try:
                self.fast(arguments)
            except Exception:  # refused (or could not tell): jsonschema decides, and says why
                pass
            else:
                return []
        found: list[ValidationError] = list(self.validator.iter_errors(arguments))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return sorted(found, key=lambda error: [str(part) for part in error.absolute_path])
