"""Built-in tools that ship as python tool code of ours inside the task (the "shipped module" kind).

The other kind of built-in, a tool provider process (tool_sources.py ``_PROVIDERS``), suits tools
that own a resource (the workspace's files, a shell). A tool that works on the trial's tables is
better as a python tool: it then runs in the trial's worker, inside its sandbox, and its writes take
the runner's ordinary state path (one committed batch per call, the stable hash, diffs, resets).

So a shipped tool is a tau-style tool class (static ``get_info()`` and ``invoke(data, **arguments)``,
optional ``category`` / ``timeout_s``) in a module under ``shipped_tools/``, importing only the
standard library, ``tolokaforge.sdk.tool_result``, the runner's dependencies and its neighbours in
that folder (relatively: every module of the folder ships). A task that enables one gets its
description here, and its tool code gets the folder's modules under ``SHIPPED_PACKAGE``, so any
runner imports them exactly like the pack's own tools.

To add one: write the class in a module under ``shipped_tools/`` (listed in its ``TOOLS`` dict by the
public name), add the name and module to ``_SHIPPED`` below and to ``_BUILTINS`` in tool_sources.py
(with the value ``"shipped"``), and document it in docs/pack-format.md. Tools that need a service
the task declares (``search_kb``, ``http_request``) ship the same way, with their settings, through
services.py.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Iterable
from importlib.resources import files
from typing import Any, cast

from tolokaforge.core.models import ToolCode, ToolDescription, ToolSource

__all__ = ["SHIPPED_PACKAGE", "SHIPPED_TOOLS", "shipped_bundle", "shipped_tools", "with_shipped_code"]

SHIPPED_PACKAGE = "_tolokaforge_builtin"
"""The folder of the tool code that holds our shipped modules (a pack may not use this name)."""

_SHIPPED: dict[str, str] = {
    "db_query": "db_tools",
    "db_update": "db_tools",
    "sql_query": "db_tools",
    "get_db_schema": "db_tools",
}
"""Tool name -> the module under shipped_tools/ whose ``TOOLS`` holds its class."""

SHIPPED_TOOLS = tuple(_SHIPPED)

_CATEGORIES = ("read", "write", "compute")


def _module(name: str) -> Any:
    return importlib.import_module(f"{__package__}.shipped_tools.{name}")


def _describe(name: str) -> ToolDescription:
    module = _SHIPPED[name]
    cls = _module(module).TOOLS[name]
    function = cast(dict[str, Any], cls.get_info()["function"])
    category = getattr(cls, "category", None)
    timeout = getattr(cls, "timeout_s", None)
    return ToolDescription(
        name=name,
        description=str(function.get("description", "")),
        parameters=cast(dict[str, Any], function["parameters"]),
        source=ToolSource(module_path=f"{SHIPPED_PACKAGE}.{module}", class_name=name),
        category=category if category in _CATEGORIES else None,
        timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
    )


def shipped_tools(names: Iterable[str]) -> list[ToolDescription]:
    """The descriptions of the shipped tools among ``names`` (others are left to their own sources)."""
    return [_describe(name) for name in names if name in _SHIPPED]


_WITH_CODE: dict[int, ToolCode] = {}
"""A pack's bundle (by identity, while it lives) -> the bundle plus our modules: one object per pack,
so the tasks that share the bundle still share one wire part (trial_spec.TaskWires)."""


def shipped_bundle(code: ToolCode) -> ToolCode | None:
    """The bundle ``with_shipped_code`` made of ``code`` so far, if any (to add files known only later)."""
    return _WITH_CODE.get(id(code))


def with_shipped_code(code: ToolCode | None, tools: Iterable[ToolDescription]) -> ToolCode | None:
    """``code`` plus the text of the shipped modules when some of ``tools`` come from them."""
    prefix = SHIPPED_PACKAGE + "."
    if code is None or code.files is None:
        return code
    if not any(tool.source.module_path.startswith(prefix) for tool in tools):
        return code
    held = _WITH_CODE.get(id(code))
    if held is not None:
        return held
    # Every module of the folder travels: a tool's module may import its neighbours (db_tools.py
    # imports sql_view.py).
    shipped = files(f"{__package__}.shipped_tools")
    added = {
        f"{SHIPPED_PACKAGE}/{entry.name}": entry.read_text(encoding="utf-8")
        for entry in shipped.iterdir()
        if entry.name.endswith(".py")
    }
    combined = ToolCode(files={**code.files, **added})
    _WITH_CODE[id(code)] = combined
    weakref.finalize(code, _WITH_CODE.pop, id(code), None)
    return combined
