"""A pack's python tools, imported in isolation, and the code bundle shipped to the runner.

Two packs may both have a package named ``tools``; putting a pack on ``sys.path`` would make the
second pack silently reuse the first one's modules. So each pack root is mounted as its own synthetic
package, ``_tolokaforge_pack_<digest of the root path>``, and its modules are imported beneath it
(the pack's code imports its own modules relatively, ``from ._common import x``).

The runner never reads the pack from disk: the pack's text files (code and data) travel in the TrialSpec as
``ToolCode(files=...)`` so a runner on another machine loads exactly the same code, with the pack root
as the bundle root (module paths and the custom-checks file are relative to it).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from tolokaforge.core.models import ToolCode, ToolDescription, ToolSource
from tolokaforge.core.pack_imports import imported_in_isolation

__all__ = [
    "PackTool",
    "ToolModuleError",
    "bundle_files",
    "import_tool_module",
    "is_module_shaped",
    "mount_pack",
]

_PREFIX = "_tolokaforge_pack_"
_CATEGORIES = ("read", "write", "compute")


class ToolModuleError(Exception):
    """The tool module cannot be imported or does not describe its tools."""


@dataclass(frozen=True)
class PackTool:
    """One tool class of a pack, described as the runner receives it."""

    description: ToolDescription
    side: str | None
    """The class's ``side`` attribute ("agent" / "user") when it declares one."""


def mount_pack(root: Path) -> str:
    """Mount ``root`` as a synthetic package (idempotent) and return the package name."""
    package = _PREFIX + hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    if package not in sys.modules:
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        module = importlib.util.module_from_spec(spec)
        module.__path__ = [str(root.resolve())]
        sys.modules[package] = module
    return package


def import_tool_module(root: Path, module_path: str) -> dict[str, PackTool]:
    """Import ``module_path`` (dotted, relative to the pack root) and describe its tools by name."""
    package = mount_pack(root)
    try:
        module = imported_in_isolation(f"{package}.{module_path}", root, package)
    except Exception as error:  # the pack's import-time failure is the pack's defect, reported as such
        raise ToolModuleError(f"importing {module_path!r} raised {type(error).__name__}: {error}") from error
    tools: dict[str, PackTool] = {}
    declared = getattr(module, "TOOLS", None)
    if isinstance(declared, dict):
        # Public style: TOOLS maps names to classes that may live in a helper package imported by
        # sys.path (tau_tools/); the runner finds each by its key in this module's TOOLS.
        for key, cls in cast(dict[str, Any], declared).items():
            tool = _describe(cast(type, cls), package, holder=(module_path, str(key)))
            tools[tool.description.name] = tool
        if not tools:
            raise ToolModuleError(f"module {module_path!r} declares no tools (its TOOLS is empty)")
        return tools
    for cls in _tool_classes(module):
        tool = _describe(cls, package)
        if tool.description.name in tools:
            raise ToolModuleError(f"two tool classes are named {tool.description.name!r}")
        tools[tool.description.name] = tool
    if not tools:
        raise ToolModuleError(f"module {module_path!r} declares no tool classes (TOOLS is empty or missing)")
    return tools


def is_module_shaped(root: Path, module_path: str) -> bool:
    """Whether an ``mcp_server`` file is a plain module of tools rather than a server to run.

    Such a module (public style) exposes ``TOOLS`` as a name -> class dict and ``invoke_tool``; it
    never starts a server, so its tools are loaded as python tools.
    """
    package = mount_pack(root)
    try:
        module = imported_in_isolation(f"{package}.{module_path}", root, package)
    except Exception as error:  # reported as the pack's defect, like any tool module
        raise ToolModuleError(f"importing {module_path!r} raised {type(error).__name__}: {error}") from error
    return isinstance(getattr(module, "TOOLS", None), dict) and callable(getattr(module, "invoke_tool", None))


def _tool_classes(module: ModuleType) -> list[type]:
    declared = getattr(module, "TOOLS", None)
    if declared is not None:
        return [cast(type, item) for item in cast(list[Any], declared)]
    # Without TOOLS, every class defined in the module that looks like a tool is one.
    return [
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if callable(getattr(cls, "get_info", None)) and callable(getattr(cls, "invoke", None))
    ]


def _describe(cls: type, package: str, *, holder: tuple[str, str] | None = None) -> PackTool:
    """``holder`` (module path, TOOLS key) names where a dict-declared class is found instead of its module."""
    label = getattr(cls, "__name__", repr(cls))
    get_info = getattr(cls, "get_info", None)
    if not callable(get_info) or not callable(getattr(cls, "invoke", None)):
        raise ToolModuleError(f"tool class {label} needs static get_info() and invoke()")
    try:
        info = cast(dict[str, Any], get_info())
        function = cast(dict[str, Any], info["function"])
        name = str(function["name"])
    except Exception as error:
        raise ToolModuleError(f"{label}.get_info() is not an OpenAI function schema: {error}") from error
    module_name = cls.__module__
    if holder is None and not module_name.startswith(package + "."):
        raise ToolModuleError(f"tool class {label} is defined outside the pack ({module_name})")
    module_path, class_name = holder or (module_name[len(package) + 1 :], cls.__name__)
    category = getattr(cls, "category", None)
    timeout = getattr(cls, "timeout_s", None)
    side = getattr(cls, "side", None)
    hidden = getattr(cls, "hidden", False)
    validate_arguments = getattr(cls, "validate_arguments", True)
    description = ToolDescription(
        name=name,
        description=str(function.get("description", "")),
        parameters=cast(dict[str, Any], function.get("parameters") or {"type": "object", "properties": {}}),
        source=ToolSource(module_path=module_path, class_name=class_name),
        category=category if category in _CATEGORIES else None,
        timeout_s=float(timeout) if isinstance(timeout, int | float) and timeout > 0 else None,
        hidden=hidden is True,
        validate_arguments=validate_arguments is not False,
    )
    return PackTool(description=description, side=str(side) if isinstance(side, str) else None)


def bundle_files(root: Path) -> ToolCode:
    """Every text file of the pack by POSIX path relative to the root: code, and the data it opens.

    A tool or server that reads a file relative to itself (JSON data, wiki pages) finds it on a
    remote runner too. Caches, hidden folders and files that are not UTF-8 text stay behind (the
    bundle carries text).
    """
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or any(
            part == "__pycache__" or part.startswith(".") for part in relative.parts
        ):
            continue
        try:
            files[relative.as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return ToolCode(files=files)
