"""The fs provider's ToolProviderService: each call checked, then run on a thread in its workspace."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from tolokaforge.contracts.tool import (
    InvokeRequest,
    InvokeResponse,
    InvokeResult,
    ToolError,
    ToolErrorCategory,
)
from tolokaforge.sdk.providers import PROVIDER_PROTOCOL_VERSION, ProviderBase

from . import files, grep, tree
from .arguments import checked_arguments
from .paths import Refusal, WorkspacePin, classify, open_workspace
from .schema import INPUT_SCHEMAS, OPERATIONS, Outcome

__all__ = ["FsProvider"]

_Handler = Callable[[int, dict[str, Any]], Outcome]
"""An operation: (the workspace's descriptor, the checked arguments) -> its answer."""

_HANDLERS: dict[str, _Handler] = {
    "read": files.read,
    "write": files.write,
    "list": tree.listing,
    "read_file": files.read_file,
    "write_file": files.write_file,
    "list_dir": tree.list_dir,
    "append_file": files.append_file,
    "copy_file": tree.copy_file,
    "move_file": tree.move_file,
    "delete_file": tree.delete_file,
    "grep_workspace": grep.grep_workspace,
    "replace_lines": files.replace_lines,
}
assert set(_HANDLERS) == set(INPUT_SCHEMAS), "every declared operation has a handler, and no other"


class FsProvider(ProviderBase):
    name = "fs"
    version = "0.2.0"
    description = "Read, write, list, copy, move, delete and search files inside the trial's workspace."
    operations = OPERATIONS

    def __init__(self, protocol_version: int = PROVIDER_PROTOCOL_VERSION) -> None:
        super().__init__(protocol_version)
        self._workspace = WorkspacePin()

    async def invoke(self, message: InvokeRequest) -> AsyncIterator[InvokeResponse]:
        try:
            handler = _HANDLERS.get(message.operation)
            if handler is None:
                raise Refusal(ToolErrorCategory.NOT_FOUND, f"no operation {message.operation!r}")
            arguments = checked_arguments(message.arguments_json, INPUT_SCHEMAS[message.operation])
            workspace = message.call_context.working_directory if message.call_context else ""
            claimed = self._workspace.claim(workspace)
            # File system calls block: they run on a thread, which owns every descriptor it opens
            # (a cancelled call cannot close one under it).
            outcome = await asyncio.to_thread(_in_workspace, claimed, handler, arguments)
        except Refusal as failure:
            yield InvokeResponse(error=ToolError(category=failure.category, message=failure.message))
            return
        except Exception as error:  # a bug of ours: classified, with the raw error, never a dropped stream
            details = json.dumps({"error": repr(error), "operation": message.operation})
            yield InvokeResponse(
                error=ToolError(
                    category=ToolErrorCategory.UNKNOWN,
                    message=str(error) or repr(error),
                    details_json=details,
                )
            )
            return
        yield InvokeResponse(result=InvokeResult(output_json=json.dumps(outcome.output), text=outcome.text))


def _in_workspace(workspace: str, handler: _Handler, arguments: dict[str, Any]) -> Outcome:
    root = open_workspace(workspace)
    try:
        return handler(root, arguments)
    except OSError as error:
        # The handlers classify every path they open; this is what the system said past those.
        raise classify(error.filename or "", error) from error
    finally:
        os.close(root)
