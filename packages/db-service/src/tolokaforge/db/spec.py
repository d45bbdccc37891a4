"""The OpenAPI document, loaded once: request validation and name patterns come from it, nowhere else.

The service validates request bodies against the document's own component schemas, so the contract
file is the only definition of what a valid request is. Every body is first checked by a validator
``fastjsonschema`` compiled from those schemas (about 20x faster than interpreting them: this is on
every PATCH). The compiled validator decides; a body it rejects then goes through ``jsonschema`` only
to find the most precise error message. The two agree on every verdict but one, which a property test
pins down (tests/test_spec.py): a ``pattern`` ending in ``$`` matches before a trailing newline in
``jsonschema`` (Python's ``re`` semantics) and not in the compiled validator (JSON Schema's ECMA-262
semantics, the correct one) -- so ``"orders\n"`` is not a table name. Name patterns in paths are
applied with ``re.fullmatch`` for the same reason.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match  # pyright: ignore[reportUnknownVariableType]
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tolokaforge.contracts.db_api import openapi_document
from tolokaforge.core.fast_schema import SchemaRefusal, Validator, compiled_validator
from tolokaforge.db.errors import ValidationFailedError

__all__ = ["METHODS", "ApiSpec", "find_spec_file", "first_error"]

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_URI = "urn:tolokaforge:db-service"


_best_match = cast(Callable[[Iterator[Any]], Any], best_match)


def first_error(validator: Any, value: Any) -> tuple[str, str] | None:
    """``(message, JSON path)`` of the most relevant error ``validator`` finds in ``value``, or None."""
    error = _best_match(validator.iter_errors(value))
    if error is None:
        return None
    return str(error.message), "/".join(str(part) for part in error.absolute_path)


def find_spec_file() -> Path:
    """The contract file as shipped with the contracts package (a copy of contracts/openapi's, by codegen)."""
    return openapi_document()


class ApiSpec:
    """One OpenAPI document: its bytes (served as is), its operations and its component schemas."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = path.read_text(encoding="utf-8")
        self.document = cast(dict[str, Any], yaml.safe_load(self.text))
        resource: Resource[Any] = Resource(contents=self.document, specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(_URI, resource)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        # Per name, made on first use: a cache on the instance, so a second document (tests) has its own.
        self.fast_validator = functools.cache(self._fast_validator)
        self._validator = functools.cache(self._full_validator)
        self._pattern = functools.cache(self._compiled_pattern)

    @classmethod
    def load(cls, path: Path | None = None) -> ApiSpec:
        """The document at ``path``; by default the shipped contract, parsed once per process."""
        return cls(path) if path is not None else _default_spec()

    @cached_property
    def operations(self) -> set[tuple[str, str]]:
        """``(METHOD, path)`` for every operation the document declares."""
        paths = cast(dict[str, dict[str, Any]], self.document["paths"])
        return {
            (method.upper(), path) for path, item in paths.items() for method in item if method in METHODS
        }

    def _schema(self, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.document["components"]["schemas"][name])

    def _fast_validator(self, name: str) -> Validator:
        """Component schema ``name`` compiled to Python; raises ``SchemaRefusal``."""
        # The schemas use only keywords whose meaning draft-07 and 2020-12 share (no $ref siblings
        # that constrain, no prefixItems / unevaluated*), so the draft-07 compiler applies as is.
        return compiled_validator(
            {"$ref": f"#/components/schemas/{name}", "components": self.document["components"]}
        )

    def _full_validator(self, name: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": f"{_URI}#/components/schemas/{name}"}, registry=self._registry)

    def _compiled_pattern(self, name: str) -> re.Pattern[str]:
        return re.compile(cast(str, self._schema(name)["pattern"]))

    def validate(self, name: str, value: Any) -> None:
        """Raise ValidationFailedError unless ``value`` satisfies component schema ``name``."""
        try:
            self.fast_validator(name)(value)
            return
        except SchemaRefusal as refusal:
            fast_message = str(refusal)
        error = first_error(self._validator(name), value)
        if error is None:  # only the trailing-newline pattern case: the compiled validator is right
            raise ValidationFailedError(f"{name}: {fast_message}", {"schema": name, "path": ""})
        message, where = error
        raise ValidationFailedError(
            f"{name}: {message}" if not where else f"{name} at /{where}: {message}",
            {"schema": name, "path": where},
        )

    def matches(self, name: str, value: str) -> bool:
        """Whether ``value`` matches the ``pattern`` of string component ``name`` (whole string)."""
        return self._pattern(name).fullmatch(value) is not None

    def check_name(self, name: str, value: str, what: str) -> None:
        """Raise ValidationFailedError unless ``value`` is a valid ``name`` (TrialId, TableName, ...)."""
        if not self.matches(name, value):
            raise ValidationFailedError(f"invalid {what}: {value[:80]!r}", {"field": what, "schema": name})


@functools.cache
def _default_spec() -> ApiSpec:
    # Shared: compiled validators are cached on the instance, so every client and service reuses them.
    return ApiSpec(find_spec_file())
