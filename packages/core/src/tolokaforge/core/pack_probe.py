"""The child process a pack load asks about the pack's code; it imports the pack's modules, so it runs sandboxed.

Loading a pack needs to know what its python modules declare: the tool classes and their schemas,
whether an ``mcp_server`` file is a module of tools rather than a server, a site's ``ROUTES``.
Importing a module runs the pack's code, which must never run in the host's process (it would run
as the host's user, with its environment and its API keys). So the host starts this module in the
sandbox (tolokaforge.host.packs.code_probe) over a copy of the pack's code bundle and asks it.

One request per line on stdin, one answer per line on the descriptor the host reads:
``{"op": "tools" | "shaped" | "routes", "module": "<dotted path>"}`` ->
``{"ok": <answer>}`` or ``{"error": "<the pack's defect, in words>"}``. The pack's own output
(``print`` at import) goes to stderr, so it cannot forge an answer. Only the standard library and
core.pack_imports are imported here: the child starts in tens of milliseconds.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from tolokaforge.core.pack_imports import imported_in_isolation

__all__ = ["CATEGORIES", "describe_module", "main"]

CATEGORIES = ("read", "write", "compute")
_PREFIX = "_tolokaforge_pack_"


class PackCodeError(Exception):
    """The module cannot be imported or does not describe what the pack says it does."""


def _mount(root: Path) -> str:
    """Mount ``root`` as a synthetic package (idempotent): two packs' ``tools`` never meet."""
    package = _PREFIX + hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    if package not in sys.modules:
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        module = importlib.util.module_from_spec(spec)
        module.__path__ = [str(root.resolve())]
        sys.modules[package] = module
    return package


def _import(root: Path, module_path: str) -> tuple[ModuleType, str]:
    package = _mount(root)
    try:
        return imported_in_isolation(f"{package}.{module_path}", root, package), package
    except BaseException as error:  # the pack's import-time failure (SystemExit too) is the pack's defect
        raise PackCodeError(f"importing {module_path!r} raised {type(error).__name__}: {error}") from None


def describe_module(root: Path, module_path: str) -> list[dict[str, Any]]:
    """The tools ``module_path`` declares, each as the fields of a ToolDescription plus ``side``."""
    module, package = _import(root, module_path)
    declared = getattr(module, "TOOLS", None)
    tools: list[dict[str, Any]] = []
    if isinstance(declared, dict):
        # Public style: TOOLS maps names to classes that may live in a helper package imported by
        # sys.path (tau_tools/); the runner finds each by its key in this module's TOOLS.
        for key, cls in cast(dict[Any, Any], declared).items():
            tools.append(_describe(cast(type, cls), package, holder=(module_path, str(key))))
        if not tools:
            raise PackCodeError(f"module {module_path!r} declares no tools (its TOOLS is empty)")
        return tools
    names: set[str] = set()
    for cls in _tool_classes(module):
        tool = _describe(cls, package)
        if tool["name"] in names:
            raise PackCodeError(f"two tool classes are named {tool['name']!r}")
        names.add(tool["name"])
        tools.append(tool)
    if not tools:
        raise PackCodeError(f"module {module_path!r} declares no tool classes (TOOLS is empty or missing)")
    return tools


def _tool_classes(module: ModuleType) -> list[type]:
    declared = getattr(module, "TOOLS", None)
    if declared is not None:
        try:
            return [cast(type, item) for item in cast(list[Any], declared)]
        except TypeError as error:
            raise PackCodeError(f"TOOLS is neither a list of tool classes nor a dict: {error}") from None
    # Without TOOLS, every class defined in the module that looks like a tool is one.
    return [
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if callable(getattr(cls, "get_info", None)) and callable(getattr(cls, "invoke", None))
    ]


def _describe(cls: type, package: str, *, holder: tuple[str, str] | None = None) -> dict[str, Any]:
    """``holder`` (module path, TOOLS key) names where a dict-declared class is found instead of its module."""
    label = getattr(cls, "__name__", repr(cls))
    get_info = getattr(cls, "get_info", None)
    if not callable(get_info) or not callable(getattr(cls, "invoke", None)):
        raise PackCodeError(f"tool class {label} needs static get_info() and invoke()")
    try:
        info = cast(dict[str, Any], get_info())
        function = cast(dict[str, Any], info["function"])
        name = str(function["name"])
        description = str(function.get("description", ""))
        parameters: Any = function.get("parameters") or {"type": "object", "properties": {}}
        json.dumps(parameters)  # it travels as JSON: say so here rather than at the host
    except Exception as error:
        raise PackCodeError(f"{label}.get_info() is not an OpenAI function schema: {error}") from None
    module_name = str(getattr(cls, "__module__", ""))
    if holder is None and not module_name.startswith(package + "."):
        raise PackCodeError(f"tool class {label} is defined outside the pack ({module_name})")
    module_path, class_name = holder or (module_name[len(package) + 1 :], cls.__name__)
    category = getattr(cls, "category", None)
    timeout = getattr(cls, "timeout_s", None)
    side = getattr(cls, "side", None)
    return {
        "name": name,
        "description": description,
        "parameters": parameters,
        "source": {"module_path": module_path, "class_name": class_name},
        "category": category if category in CATEGORIES else None,
        "timeout_s": float(timeout)
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
        else None,
        "hidden": getattr(cls, "hidden", False) is True,
        "validate_arguments": getattr(cls, "validate_arguments", True) is not False,
        "side": side if isinstance(side, str) else None,
    }


def _shaped(root: Path, module_path: str) -> bool:
    """Whether an ``mcp_server`` file is a plain module of tools (public style: TOOLS dict, invoke_tool)."""
    module, _ = _import(root, module_path)
    return isinstance(getattr(module, "TOOLS", None), dict) and callable(getattr(module, "invoke_tool", None))


def _routes(root: Path, module_path: str) -> list[dict[str, Any]] | None:
    """The module's ROUTES as (key, whether it is a string, whether its handler is callable); None: no dict."""
    module, _ = _import(root, module_path)
    declared = getattr(module, "ROUTES", None)
    if not isinstance(declared, dict):
        return None
    return [
        {
            "key": key if isinstance(key, str) else repr(key),
            "text": isinstance(key, str),
            "callable": callable(value),
        }
        for key, value in cast(dict[Any, Any], declared).items()
    ]


def _answer(root: Path, request: dict[str, Any]) -> dict[str, Any]:
    op, module = request.get("op"), request.get("module")
    if not isinstance(module, str) or not module:
        return {"error": f"the request names no module: {request!r}"}
    try:
        if op == "tools":
            return {"ok": describe_module(root, module)}
        if op == "shaped":
            return {"ok": _shaped(root, module)}
        if op == "routes":
            return {"ok": _routes(root, module)}
    except PackCodeError as error:
        return {"error": str(error)}
    return {"error": f"unknown request {op!r}"}


def main() -> None:
    """Answer requests about the pack rooted at the working directory until stdin closes."""
    root = Path.cwd()
    # The answers' own descriptor; what the pack prints goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request: Any = json.loads(line)
        except ValueError as error:
            reply: dict[str, Any] = {"error": f"a request that is not JSON: {error}"}
        else:
            reply = (
                _answer(root, cast(dict[str, Any], request))
                if isinstance(request, dict)
                else {"error": "a request is an object"}
            )
        try:
            text = json.dumps(reply)
        except (TypeError, ValueError) as error:
            text = json.dumps({"error": f"the module's declarations are not plain data: {error}"})
        answers.write(text + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
