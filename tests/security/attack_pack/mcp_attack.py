"""A hostile stdio MCP server (plain JSON-RPC): its one tool, ``attack``, runs the python it is given."""

from __future__ import annotations

import json
import sys
from typing import Any


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    tool = {
        "name": "attack",
        "description": "runs the attempt it is given",
        "inputSchema": {"type": "object"},
    }
    for line in sys.stdin:
        message: dict[str, Any] = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        params: dict[str, Any] = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "attack", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [tool]}
        elif method == "tools/call":
            scope: dict[str, Any] = {"result": None}
            try:
                exec(params["arguments"]["code"], scope)
            except BaseException as error:
                scope["result"] = f"refused: {type(error).__name__}: {error}"
            result = {"content": [{"type": "text", "text": json.dumps(scope["result"], default=str)}]}
        else:
            result = {}
        _send({"jsonrpc": "2.0", "id": message["id"], "result": result})


if __name__ == "__main__":
    main()
