"""A tool worker: the process that runs one trial's python tools (``python -I -m ...workers.child LIMITS``).

It confines itself first (sandbox.confine: inside bubblewrap, resource limits, its uid and Landlock;
at the process level, resource limits and a private network namespace), moves the
protocol onto private descriptors (so a tool that prints cannot corrupt it: fd 1 becomes stderr, fd 0
/dev/null), then reads the init frame -- the task's code, its tools, the trial's tables -- imports the
tools and answers ``hello`` with what holds and what failed to load. Each ``call`` frame runs one
tool on copy-on-write views of its tables, exactly as the trusted path does in the runner, and
answers with the output and the changes; it applies them locally after answering (the runner
commits them to the store, or discards this worker if it cannot). A tool that returns a
``tolokaforge.sdk.tool_result.ReportedError`` is answered the same way, with its message as
``reported_error`` and an empty output: its changes stand. Anything the tool raises --
``SystemExit``, ``KeyboardInterrupt`` and other ``BaseException`` included -- fails that call only.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import traceback
from typing import Any, cast

from tolokaforge.runner.process.sandbox import confine

from .frames import encode_reply, read_request, write_frame

TRACEBACK_CHARS = 16_000
"""The most of a raising tool's traceback a call's record keeps (the innermost frames, at its end)."""
_TOOL_RESULT = "tolokaforge.sdk.tool_result"
"""Where ReportedError lives. Looked up in ``sys.modules``, never imported here: a tool can only have
returned one if its code imported that module, and every other worker is spared the import."""


def _private_pipes() -> tuple[int, int]:
    request_fd, reply_fd = os.dup(0), os.dup(1)  # dup'ed descriptors are not inherited by exec
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return request_fd, reply_fd


def register_package(root: str, package: str) -> None:
    """Make the task's code importable as ``package`` (once: a forked worker inherits its zygote's)."""
    if package not in sys.modules:
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        module = importlib.util.module_from_spec(spec)
        module.__path__ = [root]
        sys.modules[package] = module


def import_tools(
    root: str, package: str, tools: dict[str, tuple[str, str]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The tools by key, and why each of the others did not load (in a forked worker, the zygote imported the modules)."""
    register_package(root, package)
    loaded: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for key, (module_path, class_name) in tools.items():
        try:
            imported = importlib.import_module(f"{package}.{module_path}")
        except ModuleNotFoundError as error:
            problems[key] = f"module {module_path!r} not found in the task's code at {root}: {error}"
            continue
        except BaseException as error:  # pack code raising at import time is the pack's defect
            problems[key] = f"importing {module_path!r} from {root} raised {type(error).__name__}: {error}"
            continue
        # A module whose TOOLS maps names to classes (public style) is searched by key first.
        declared: object = getattr(imported, "TOOLS", None)
        target: Any = cast(dict[str, Any], declared).get(class_name) if isinstance(declared, dict) else None
        if target is None:
            target = getattr(imported, class_name, None)
        if target is None:
            problems[key] = f"{module_path} has no class {class_name!r}"
        elif not callable(getattr(target, "invoke", None)):
            problems[key] = f"{module_path}.{class_name} has no invoke()"
        else:
            loaded[key] = target
    return loaded, problems


def _reported_message(result: Any) -> str | None:
    """The message of the error the tool reported, when ``result`` is a ReportedError."""
    module = sys.modules.get(_TOOL_RESULT)
    if module is not None and isinstance(result, module.ReportedError):
        return cast(str, result.message)
    return None


def _failure(error: BaseException) -> dict[str, Any]:
    if isinstance(error, FileNotFoundError):
        category = "not_found"
    elif isinstance(error, PermissionError):
        category = "permission_denied"
    else:
        category = "execution_failed"
    if isinstance(error, SystemExit):
        message = f"SystemExit: the tool called sys.exit({error.code!r})"
    else:
        message = f"{type(error).__name__}: {error}"
    return {
        "ok": False,
        "category": category,
        "exception": type(error).__name__,
        "message": message,
        "traceback": kept_traceback(error),
    }


def kept_traceback(error: BaseException) -> str:
    """The exception's traceback for the call's record (never the model's text), its tail kept when long."""
    text = "".join(traceback.format_exception(error))
    return text if len(text) <= TRACEBACK_CHARS else "...\n" + text[-TRACEBACK_CHARS:]


def main() -> None:
    _, limits_report = confine(sys.argv[1])
    request_fd, reply_fd = _private_pipes()
    init = read_request(request_fd)
    if init is None:
        return
    os.chdir(init["workspace"])
    tools, problems = import_tools(init["root"], init["package"], init["tools"])
    serve(
        request_fd,
        reply_fd,
        init["tables"],
        tools,
        {"ok": True, "limits": limits_report, "problems": problems},
    )


def serve(
    request_fd: int,
    reply_fd: int,
    tables: dict[str, Any],
    tools: dict[str, Any],
    hello: dict[str, Any],
    views: dict[str, Any] | None = None,
) -> None:
    """Answer ``hello`` to the init frame just read, then one reply per ``call`` frame until the runner hangs up.

    ``views`` are working views of ``tables`` built already (by the zygote, over the tables it holds).
    """
    from tolokaforge.runner.state.cow import CowTables, TableShapeError, apply_changes

    views = {} if views is None else views
    write_frame(reply_fd, encode_reply(hello))
    while True:
        request = read_request(request_fd)
        if request is None:
            return
        _, key, arguments = request
        data = CowTables(tables, views)
        changes: list[dict[str, Any]] | None = None
        try:
            result = tools[key].invoke(data, **arguments)
            reported = _reported_message(result)
            if reported is not None:
                output = ""
            else:
                output = result if isinstance(result, str) else json.dumps(result, default=str)
            changes = data.changes()
            reply: dict[str, Any] = {"ok": True, "output": output, "changes": changes}
            if reported is not None:  # the tool's own error answer: its changes stand
                reply["reported_error"] = reported
        except TableShapeError as error:
            reply = {
                "ok": False,
                "category": "execution_failed",
                "exception": "TableShapeError",
                "message": str(error),
            }
        except BaseException as error:  # whatever a tool raises fails its call only
            reply = _failure(error)
            traceback.print_exc()
        try:
            frame = encode_reply(reply)
        except (TypeError, ValueError) as error:
            changes = None
            frame = encode_reply(
                {
                    "ok": False,
                    "category": "execution_failed",
                    "exception": type(error).__name__,
                    "message": f"the call's output or changes cannot be encoded: {error}",
                }
            )
        write_frame(reply_fd, frame)
        if changes:
            apply_changes(tables, changes)
        data.settle()
        # _thread, not threading: importing threading would cost every forked worker its at-fork handler.
        if _thread._count() > 0:  # pyright: ignore[reportPrivateUsage]
            views = {}  # a thread the tool left running may still write to these views: build new ones


if __name__ == "__main__":
    main()
