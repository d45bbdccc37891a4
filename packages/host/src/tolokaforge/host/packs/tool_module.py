"""A pack's python tools, described by a sandboxed child, and the code bundle shipped to the runner.

The loader never imports a pack's module itself: importing runs the pack's code, which belongs in the
sandbox (code_probe.py asks a confined child, tolokaforge.core.pack_probe, which mounts the pack root
as its own synthetic package, so two packs' ``tools`` never meet). Here the child's plain answers
become ToolDescriptions.

The runner never reads the pack from disk: the pack's text files (code and data) travel in the TrialSpec as
``ToolCode(files=...)`` so a runner on another machine loads exactly the same code, with the pack root
as the bundle root (module paths and the custom-checks file are relative to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tolokaforge.core.models import ToolCode, ToolDescription

from .code_probe import ProbeError, code_probe

__all__ = [
    "PackTool",
    "ToolModuleError",
    "bundle_files",
    "describe_tool_module",
    "is_module_shaped",
]


class ToolModuleError(Exception):
    """The tool module cannot be imported or does not describe its tools."""


@dataclass(frozen=True)
class PackTool:
    """One tool class of a pack, described as the runner receives it."""

    description: ToolDescription
    side: str | None
    """The class's ``side`` attribute ("agent" / "user") when it declares one."""


def describe_tool_module(module_path: str) -> dict[str, PackTool]:
    """The tools ``module_path`` (dotted, relative to the pack root) declares, by name."""
    try:
        declared = code_probe().tools(module_path)
    except ProbeError as error:  # the pack's defect, reported as such
        raise ToolModuleError(str(error)) from error
    tools: dict[str, PackTool] = {}
    for fields in declared:
        side: Any = fields.pop("side", None)
        try:
            description = ToolDescription.model_validate(fields)
        except ValidationError as error:
            raise ToolModuleError(
                f"tool {fields.get('name')!r} of {module_path!r} is not a valid tool description: {error}"
            ) from error
        if description.name in tools:
            raise ToolModuleError(f"two tools of {module_path!r} are named {description.name!r}")
        tools[description.name] = PackTool(
            description=description, side=side if isinstance(side, str) else None
        )
    return tools


def is_module_shaped(module_path: str) -> bool:
    """Whether an ``mcp_server`` file is a plain module of tools rather than a server to run.

    Such a module (public style) exposes ``TOOLS`` as a name -> class dict and ``invoke_tool``; it
    never starts a server, so its tools are loaded as python tools.
    """
    try:
        return code_probe().module_shaped(module_path)
    except ProbeError as error:  # reported as the pack's defect, like any tool module
        raise ToolModuleError(str(error)) from error


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
