"""Tool sources: how the runner turns a ToolDescription into something it can call."""

from __future__ import annotations

from .base import Tool, ToolRegistry
from .python_tools import PythonTool, load_python_tool

__all__ = ["PythonTool", "Tool", "ToolRegistry", "load_python_tool"]
