"""The base of every spec model: unknown keys are refused, and errors name the key."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["SpecModel", "describe_validation_error"]


class SpecModel(BaseModel):
    """A model of an author- or engine-written payload: no unknown keys, no coercion of strings to numbers."""

    model_config = ConfigDict(extra="forbid", strict=False, str_strip_whitespace=False)


def describe_validation_error(error: ValidationError, *, prefix: str = "") -> str:
    """One line per problem, each naming the dotted key it is about: ``task.grading.combine_method: ...``."""
    lines: list[str] = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"])
        if prefix:
            where = f"{prefix}.{where}" if where else prefix
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = f"unknown key {item['loc'][-1]!r} (not part of the schema)"
        elif item["type"] in ("literal_error", "enum"):
            message = f"{message}, got {item['input']!r}"
        lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)
