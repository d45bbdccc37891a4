"""Terminal-Bench task folders as packs: the loader (loader.py), the task folder (task_dir.py) and what
its container would hold (environment.py). docs/terminal.md describes the mapping."""

from .loader import AGENT_TOOLS, inspect_terminal_pack, is_terminal_source, load_terminal_pack

__all__ = ["AGENT_TOOLS", "inspect_terminal_pack", "is_terminal_source", "load_terminal_pack"]
