"""Tau-style python tools: a class with static ``get_info()`` and ``invoke(data, **kwargs) -> str``.

The class is found in the task's code bundle (see code_loader.py). What the model is offered is the
ToolDescription the host sent (its name and parameters), so a pack cannot offer one schema and
validate against another.

By default a tool is a :class:`WorkerTool`: the runner never imports its code; the trial's worker
process does (workers/). In trusted mode (``--isolation thread``) it is a :class:`PythonTool`,
imported here and invoked on one of the runner's threads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from tolokaforge.core.models import ToolDescription
from tolokaforge.sdk.tool_result import ReportedError

from ..errors import ToolLoadError
from .base import compile_parameters
from .code_loader import CodeBundle
from .schema_check import SchemaCheck

__all__ = ["Finished", "PythonTool", "WorkerTool", "load_python_tool", "worker_tool"]


class Finished(NamedTuple):
    """A python tool call that returned inside its budget, its changes committed."""

    output: str
    """What the model reads; "" when the tool reported an error."""
    changes: list[dict[str, Any]]
    reported: str | None = None
    """The message of the error the tool reported (it returned a ReportedError), else None."""


@dataclass(frozen=True)
class PythonTool:
    description: ToolDescription
    validator: SchemaCheck
    target: Any  # the tool class; its ``invoke`` is a static method

    def invoke(self, data: dict[str, Any], arguments: Mapping[str, Any]) -> str | ReportedError:
        result = self.target.invoke(data, **arguments)
        if isinstance(result, str | ReportedError):
            return result
        # Tau tools return text; a tool returning JSON-able data is shown as JSON rather than repr().
        return json.dumps(result, default=str)


@dataclass(frozen=True)
class WorkerTool:
    """A python tool whose code only ever runs in the trial's worker process."""

    description: ToolDescription
    validator: SchemaCheck
    module_path: str
    class_name: str

    @property
    def key(self) -> str:
        return f"{self.module_path}:{self.class_name}"

    def invoke(self, data: dict[str, Any], arguments: Mapping[str, Any]) -> str:
        # Registries hold every kind of tool; the executor sends this one to a worker. Reaching here
        # is a runner bug, never a tool failure.
        raise TypeError(f"{self.description.name!r} runs in a tool worker; call it through the executor")


def worker_tool(description: ToolDescription) -> WorkerTool:
    source = description.source
    return WorkerTool(
        description=description,
        validator=compile_parameters(description),
        module_path=source.module_path,
        class_name=source.class_name,
    )


def load_python_tool(description: ToolDescription, bundle: CodeBundle) -> PythonTool:
    source = description.source
    module = bundle.import_module(source.module_path)
    declared: object = getattr(module, "TOOLS", None)
    target: Any = None
    if isinstance(declared, dict):
        # A module whose TOOLS maps names to classes is found by key (the class may live elsewhere).
        target = cast(dict[str, Any], declared).get(source.class_name)
    if target is None:
        target = getattr(module, source.class_name, None)
    if target is None:
        raise ToolLoadError(
            f"tool {description.name!r}: {source.module_path} has no class {source.class_name!r}"
        )
    if not callable(getattr(target, "invoke", None)):
        raise ToolLoadError(
            f"tool {description.name!r}: {source.module_path}.{source.class_name} has no invoke()"
        )
    return PythonTool(description=description, validator=compile_parameters(description), target=target)
