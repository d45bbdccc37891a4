"""Patch requests checked with each operation going straight to the schema its ``op`` names.

An operation is a ``oneOf`` of four schemas (``Operation`` in the OpenAPI document). The compiled
validator (spec.py) decides a ``oneOf`` by trying every alternative, and each one that fails raises
and catches an exception inside fastjsonschema: three per operation, some 60 µs of the 450 µs a
runner spends on a one-record tool call (in process, ``cProfile``). The document also names the
operation's discriminator (``op``), and each alternative requires ``op`` and fixes it to the value the
discriminator maps to it, so at most one alternative can match: the one ``op`` names. :class:`PatchCheck`
checks the request with its operations left open, then each operation against that one schema.

Like init_check.py this only ever accepts: anything it does not accept goes through the full
validation, which decides and says why. It reads the mapping from the contract and turns itself off
if the contract's operations stop being told apart by ``op`` alone (tests/test_spec.py holds it
to the full validation's verdicts).
"""

from __future__ import annotations

import copy
import functools
from functools import cached_property
from typing import Any, cast

from tolokaforge.core.fast_schema import SchemaRefusal, Validator, compiled_validator
from tolokaforge.db.spec import ApiSpec

__all__ = ["PatchCheck"]

_OPERATION = "Operation"


class PatchCheck:
    """``validate(name, body)`` for ``StatePatchRequest`` and ``TablePatchRequest``."""

    def __init__(self, spec: ApiSpec) -> None:
        self._spec = spec
        self._open_validator = functools.cache(self._compile_open)

    def validate(self, name: str, body: Any) -> None:
        if not self._accepts(name, body):
            self._spec.validate(name, body)

    @cached_property
    def _by_op(self) -> dict[str, Validator] | None:
        """Each ``op`` value's compiled schema, when the contract tells operations apart by ``op``."""
        schemas = cast(dict[str, Any], self._spec.document["components"]["schemas"])
        operation = cast(dict[str, Any], schemas[_OPERATION])
        discriminator = cast(dict[str, Any], operation.get("discriminator") or {})
        mapping = cast(dict[str, str], discriminator.get("mapping") or {})
        prefix = "#/components/schemas/"
        alternatives = [cast(dict[str, str], ref).get("$ref", "") for ref in operation.get("oneOf", [])]
        if discriminator.get("propertyName") != "op" or sorted(alternatives) != sorted(mapping.values()):
            return None
        by_op: dict[str, Validator] = {}
        for value, ref in mapping.items():
            if not ref.startswith(prefix):
                return None
            schema = cast(dict[str, Any], schemas[ref.removeprefix(prefix)])
            fixed = cast(dict[str, Any], schema.get("properties", {})).get("op")
            if (
                schema.get("type") != "object"
                or "op" not in schema.get("required", [])
                or fixed != {"const": value}
            ):
                return None
            by_op[value] = self._spec.fast_validator(ref.removeprefix(prefix))
        return by_op

    def _compile_open(self, name: str) -> Validator:
        """Component ``name`` compiled with every operation accepted as it is (checked apart)."""
        components = copy.deepcopy(self._spec.document["components"])
        components["schemas"][_OPERATION] = {}
        return compiled_validator({"$ref": f"#/components/schemas/{name}", "components": components})

    def _accepts(self, name: str, body: Any) -> bool:
        by_op = self._by_op
        if by_op is None:
            return False
        try:
            self._open_validator(name)(body)
        except SchemaRefusal:
            return False
        request = cast(dict[str, Any], body)  # an object: the open validator said so
        if name == "TablePatchRequest":
            operations = cast(list[Any], request["operations"])
        else:
            changes = cast(list[dict[str, Any]], request["changes"])
            operations = [operation for change in changes for operation in change["operations"]]
        for operation in operations:
            op = cast(dict[str, Any], operation).get("op") if type(operation) is dict else None
            check = by_op.get(op) if type(op) is str else None
            if check is None:
                return False
            try:
                check(operation)
            except SchemaRefusal:
                return False
        return True
