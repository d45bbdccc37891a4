"""Tolokaforge SDK: what pack authors and tool-provider authors import.

Each module is used on its own (``from tolokaforge.sdk.tools_interface import create_server``); this
package imports nothing, because tool code in a sandboxed worker imports ``tool_result`` and must not
pay for the MCP SDK or gRPC on the way.
"""
