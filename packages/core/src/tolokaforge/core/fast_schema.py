"""JSON Schemas compiled to Python by fastjsonschema, once per distinct schema and options.

Interpreting a schema at every call (jsonschema) costs several times more than running code compiled
from it, and the same schemas are checked over and over: the db service's request bodies, a tool's
arguments, a provider's output. Every compiled check in the code base comes from here, so each
distinct schema is compiled once per process whoever asks. fastjsonschema speaks draft-07; callers
decide when a schema means the same in their draft (see runner/tools/schema_check.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

__all__ = ["SchemaRefusal", "Validator", "compiled_validator"]

Validator = Callable[[Any], Any]
"""Returns the value (defaults filled in, if asked for) or raises :data:`SchemaRefusal`."""

SchemaRefusal = fastjsonschema.JsonSchemaException
"""What a compiled validator raises for a value its schema refuses."""


def compiled_validator(
    schema: Mapping[str, Any], *, use_default: bool = True, use_formats: bool = True
) -> Validator:
    """``schema`` compiled to Python; raises ``fastjsonschema.JsonSchemaDefinitionException`` for a
    schema it cannot compile. ``use_default`` writes ``default`` values into the checked value,
    ``use_formats`` checks ``format``."""
    return _compiled(json.dumps(schema, sort_keys=True), use_default, use_formats)


# Keyed by the schema's canonical text: a schema is a dict (unhashable), and two equal schemas built
# apart (every trial registers its tools' schemas again) should share one compiled validator.
@functools.lru_cache(maxsize=4096)
def _compiled(schema_json: str, use_default: bool, use_formats: bool) -> Validator:
    return fastjsonschema.compile(json.loads(schema_json), use_default=use_default, use_formats=use_formats)
