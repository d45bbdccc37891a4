"""The shape every tool source produces, and the per-actor registry of a trial's tools."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tolokaforge.contracts.runner import ToolSchema
from tolokaforge.core.models import ToolDescription

from ..errors import ToolLoadError
from .arguments import ArgumentCheck

__all__ = ["Tool", "ToolRegistry", "compile_parameters"]


class Tool(Protocol):
    """A callable tool. ``invoke`` runs on a worker thread with the trial's tables as ``data``."""

    @property
    def description(self) -> ToolDescription: ...

    @property
    def validator(self) -> ArgumentCheck: ...

    def invoke(self, data: dict[str, Any], arguments: Mapping[str, Any]) -> str: ...


def compile_parameters(description: ToolDescription) -> ArgumentCheck:
    """The tool's argument check; a schema that is not valid JSON Schema fails registration."""
    try:
        return _compiled(json.dumps(description.parameters, sort_keys=True))
    except SchemaError as error:
        raise ToolLoadError(
            f"tool {description.name!r}: parameters are not a valid JSON Schema: {error.message}"
        ) from error
    except ValueError as error:
        raise ToolLoadError(f"tool {description.name!r}: {error}") from error


@functools.lru_cache(maxsize=4096)
def _compiled(parameters_json: str) -> ArgumentCheck:
    # Checking a schema against the metaschema costs milliseconds, and every trial of a task registers
    # the same schemas: compile each distinct schema once. Validators are immutable, so sharing is safe.
    parameters = json.loads(parameters_json)
    Draft202012Validator.check_schema(parameters)
    if parameters.get("type", "object") != "object":
        raise ValueError(f"parameters must describe an object, not {parameters.get('type')!r}")
    return ArgumentCheck.of(Draft202012Validator(parameters))


@dataclass
class ToolRegistry:
    """One actor's tools ("agent" or "user"), in declaration order."""

    actor: str
    tools: dict[str, Tool] = field(default_factory=lambda: {})

    def add(self, tool: Tool) -> None:
        name = tool.description.name
        if name in self.tools:
            raise ToolLoadError(f"{self.actor} tool {name!r} is declared twice")
        self.tools[name] = tool

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def names(self) -> list[str]:
        return list(self.tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def schemas(self) -> list[ToolSchema]:
        return [
            ToolSchema(
                name=tool.description.name,
                description=tool.description.description,
                parameters_json=json.dumps(tool.description.parameters, sort_keys=True),
                category=tool.description.category or "",
                timeout_s=tool.description.timeout_s or 0.0,
            )
            for tool in self
        ]
