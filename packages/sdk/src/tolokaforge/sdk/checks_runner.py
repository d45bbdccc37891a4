"""The custom-checks harness, run by the runner as ``python -m tolokaforge.sdk.checks_runner``.

It reads one JSON payload on stdin::

    {"file": abs path of checks.py, "search_paths": [folders put first on sys.path],
     "initial_state": {...}, "final_state": {...}, "transcript": [wire messages],
     "failed_call_ids": [...], "task": {"task_id", "name", "description", "category"}}

imports the file (only that, with ``"load_only": true``), and prints one JSON line (the last line of stdout): a list of rows, each
``{"name", "result": {"status", "score", "message", "details"}}`` or ``{"name", "error"}``.

Two styles of file run here. ``@init``/``@check`` (checks_interface.py): ``init`` gets the
CheckContext, then each check runs in declaration order. Functions named ``check_<name>(state,
transcript)`` returning a ``{status, score, message, details?}`` mapping: each gets the final tables
and the transcript wire. A file that cannot be imported ends the process with status 3 and the
error as the last line of stderr, so the runner reports it as the suite's failure.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

from . import checks_interface as interface
from .checks_helpers import build_check_context, transcript_from_wire

__all__ = ["main", "run_checks"]

IMPORT_FAILED = 3


def main() -> int:
    payload = cast(dict[str, Any], json.load(sys.stdin))
    for folder in reversed(cast(list[str], payload.get("search_paths", []))):
        sys.path.insert(0, folder)
    interface.reset_registry()
    try:
        module = _import(str(payload["file"]))
    except BaseException as error:  # the pack's import-time failure is reported, whatever it is
        sys.stderr.write(f"\nimporting the checks file raised {type(error).__name__}: {error}\n")
        return IMPORT_FAILED
    if payload.get("load_only"):
        # validate's question: does the file import, and is it written for an interface we run?
        version = interface.get_interface_version()
        if version not in interface.SUPPORTED_VERSIONS:
            supported = ", ".join(interface.SUPPORTED_VERSIONS)
            sys.stderr.write(f"\n@init declares interface_version {version!r}; supported: {supported}\n")
            return IMPORT_FAILED
        sys.stdout.write("\n[]\n")
        return 0
    rows = run_checks(module, payload)
    sys.stdout.write("\n" + json.dumps(rows, default=str) + "\n")
    return 0


def _import(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("tolokaforge_custom_checks", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_checks(module: ModuleType, payload: dict[str, Any]) -> list[dict[str, Any]]:
    registered = interface.get_registered_checks()
    setup = interface.get_init_func()
    if registered or setup is not None:
        return _run_declared(registered, setup, payload)
    return _run_legacy(module, payload)


def _run_declared(
    checks: dict[str, interface.CheckFunction], setup: interface.InitFunction | None, payload: dict[str, Any]
) -> list[dict[str, Any]]:
    version = interface.get_interface_version()
    if version not in interface.SUPPORTED_VERSIONS:
        message = (
            f"interface_version {version!r} is not supported ({', '.join(interface.SUPPORTED_VERSIONS)})"
        )
        return [{"name": name, "error": message} for name in checks] or [{"name": "init", "error": message}]
    task = cast(dict[str, Any], payload.get("task", {}))
    context = build_check_context(
        initial_tables=cast(dict[str, Any], payload.get("initial_state", {})),
        final_tables=cast(dict[str, Any], payload.get("final_state", {})),
        transcript=transcript_from_wire(
            cast(list[dict[str, Any]], payload.get("transcript", [])),
            frozenset(cast(list[str], payload.get("failed_call_ids", []))),
        ),
        task=interface.TaskContext(
            task_id=str(task.get("task_id", "")),
            task_name=str(task.get("name", "")),
            task_description=str(task.get("description", "")),
            domain=str(task.get("category", "")),
        ),
    )
    if setup is not None:
        try:
            setup(context)
        except Exception as error:
            message = f"init {getattr(setup, '__name__', 'init')} raised {type(error).__name__}: {error}"
            return [{"name": name, "error": message} for name in checks] or [
                {"name": "init", "error": message}
            ]
    rows: list[dict[str, Any]] = []
    for name, function in checks.items():
        rows.append(_declared_row(name, function))
    return rows


def _declared_row(name: str, function: Callable[[], Any]) -> dict[str, Any]:
    try:
        outcome = function()
    except Exception as error:
        return {"name": name, "error": f"{type(error).__name__}: {error}"}
    if isinstance(outcome, interface.CheckPassed | interface.CheckFailed):
        status = "passed" if isinstance(outcome, interface.CheckPassed) else "failed"
        result = {
            "status": status,
            "score": outcome.score,
            "message": outcome.message,
            "details": outcome.details,
        }
        return {"name": name, "result": result}
    if isinstance(outcome, interface.CheckSkipped):
        return {"name": name, "result": {"status": "skipped", "message": outcome.message}}
    return {
        "name": name,
        "error": f"returned {type(outcome).__name__}; a check returns CheckPassed, CheckFailed or CheckSkipped",
    }


def _run_legacy(module: ModuleType, payload: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    names = sorted(n for n in dir(module) if n.startswith("check_") and callable(getattr(module, n)))
    for attribute in names:
        name = attribute[len("check_") :]
        try:
            result = getattr(module, attribute)(payload.get("final_state", {}), payload.get("transcript", []))
            if not isinstance(result, dict):
                raise TypeError(f"returned {type(result).__name__}, expected a dict")
            rows.append({"name": name, "result": result})
        except Exception as error:
            rows.append({"name": name, "error": f"{type(error).__name__}: {error}"})
    return rows


if __name__ == "__main__":
    sys.exit(main())
