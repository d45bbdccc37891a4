"""The tally as an MCP server keeping its state in-process: ``data["counter"]`` is the plain value."""

from __future__ import annotations

from typing import Any

from tolokaforge.core.tools_interface import create_server

mcp, registry, TOOLS = create_server(__file__, "tally")


@registry.tool("Add an amount to the tally.")
def add_to_tally(data: dict[str, Any], amount: int) -> dict[str, Any]:
    data["counter"] += amount
    data["notes"].append(f"added {amount}")
    return {"counter": data["counter"]}


if __name__ == "__main__":
    mcp.run(transport="stdio")
