"""A ToolProviderService plugin giving the model a filesystem: its trial's workspace, and nothing else.

Operations: ours (``read``, ``write``, ``list``) and the public file tools (``read_file``,
``write_file``, ``list_dir``, ``append_file``, ``copy_file``, ``move_file``, ``delete_file``,
``grep_workspace``, ``replace_lines``; see schema.py). Every path is opened beneath the workspace the
kernel names in each call's CallContext, never following a symlink: ``..``, an absolute path outside
``/env/fs/agent-visible``, or a symlink anywhere on the path is permission_denied, and a missing file
is not_found.
"""

from __future__ import annotations

__all__: list[str] = []
