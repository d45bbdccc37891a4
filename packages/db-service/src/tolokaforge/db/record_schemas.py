"""Tables' declared record schemas (TableSchema.record_schema): compiled once, checked on every write.

A record schema comes from the client, so everything about it is the client's input: a schema that is not
valid JSON Schema, a ``$ref`` that resolves nowhere, or a pattern Python cannot compile is a 422, never a
500. References never leave the schema itself: the registry retrieves nothing, so no file or URL is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from jsonschema import Draft202012Validator, validators
from referencing import Registry
from referencing.exceptions import NoSuchResource

from tolokaforge.db.errors import ValidationFailedError
from tolokaforge.db.spec import first_error
from tolokaforge.db.tables import Record

__all__ = ["RecordValidator", "compile_schemas"]


def _retrieve_nothing(uri: str) -> Any:
    raise NoSuchResource(ref=uri)


_REGISTRY: Registry[Any] = Registry(retrieve=_retrieve_nothing)  # pyright: ignore[reportCallIssue]


class RecordValidator:
    """Checks records of one table against its declared JSON Schema."""

    __slots__ = ("_validator", "table_name")

    def __init__(self, table_name: str, schema: Mapping[str, Any]) -> None:
        self.table_name = table_name
        try:
            cls = validators.validator_for(schema, default=Draft202012Validator)
            cls.check_schema(dict(schema))
            self._validator: Any = cls(schema, registry=_REGISTRY)
        except Exception as exc:  # anything wrong with a client's schema is the client's error
            raise ValidationFailedError(
                f"record_schema of table {table_name!r} is not a valid JSON Schema: {_short(exc)}",
                {"table_name": table_name},
            ) from None

    def check(self, records: Iterable[Record], *, context: str) -> None:
        """Raise ValidationFailedError naming the first record that violates the schema."""
        for record in records:
            try:
                error = first_error(self._validator, record)
            except Exception as exc:  # an unresolvable $ref, a runaway recursion, a bad regex
                raise ValidationFailedError(
                    f"record_schema of table {self.table_name!r} cannot be applied: {_short(exc)}",
                    {"table_name": self.table_name},
                ) from None
            if error is not None:
                message, where = error
                raise ValidationFailedError(
                    f"{context}: a record of table {self.table_name!r} violates its schema: {message}",
                    {"table_name": self.table_name, "path": where},
                )


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def compile_schemas(schemas: Iterable[Mapping[str, Any]]) -> dict[str, RecordValidator]:
    """``{table_name: validator}`` from TableSchema objects; 422 on a table declared twice."""
    compiled: dict[str, RecordValidator] = {}
    for schema in schemas:
        name = cast(str, schema["table_name"])
        if name in compiled:
            raise ValidationFailedError(f"table {name!r} has two record schemas", {"table_name": name})
        compiled[name] = RecordValidator(name, cast(Mapping[str, Any], schema["record_schema"]))
    return compiled
