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
from tolokaforge.sdk.tool_result import ReportedError

from ..errors import ToolLoadError
from .schema_check import SchemaCheck

__all__ = ["Tool", "ToolRegistry", "compile_parameters"]


class Tool(Protocol):
    """A callable tool. ``invoke`` runs on a worker thread with the trial's tables as ``data``; it
    answers the text the model reads, or the error the tool reports itself (its changes stand)."""

    @property
    def description(self) -> ToolDescription: ...

    @property
    def validator(self) -> SchemaCheck: ...

    def invoke(self, data: dict[str, Any], arguments: Mapping[str, Any]) -> str | ReportedError: ...


def compile_parameters(description: ToolDescription) -> SchemaCheck:
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
def _compiled(parameters_json: str) -> SchemaCheck:
    # Checking a schema against the metaschema costs milliseconds, and every trial of a task registers
    # the same schemas: compile each distinct schema once. Validators are immutable, so sharing is safe.
    parameters = json.loads(parameters_json)
    Draft202012Validator.check_schema(parameters)
    if parameters.get("type", "object") != "object":
        raise ValueError(f"parameters must describe an object, not {parameters.get('type')!r}")
    return SchemaCheck.of(Draft202012Validator(parameters))


@dataclass
class ToolRegistry:
    """One actor's tools ("agent" or "user"), in declaration order.

    A hidden tool (``ToolDescription.hidden``) is held like any other, for the runner's own calls, but
    is never offered: :meth:`schemas` leaves it out, and ``offered_only`` lookups do not find it.
    """

    actor: str
    tools: dict[str, Tool] = field(default_factory=lambda: {})

    def add(self, tool: Tool) -> None:
        name = tool.description.name
        if name in self.tools:
            raise ToolLoadError(f"{self.actor} tool {name!r} is declared twice")
        self.tools[name] = tool

    def get(self, name: str, *, offered_only: bool = False) -> Tool | None:
        tool = self.tools.get(name)
        if tool is not None and offered_only and tool.description.hidden:
            return None
        return tool

    def names(self, *, offered_only: bool = False) -> list[str]:
        if offered_only:
            return [name for name, tool in self.tools.items() if not tool.description.hidden]
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
            if not tool.description.hidden
        ]
