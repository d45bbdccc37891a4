"""A ToolProviderService plugin giving the model a filesystem: its trial's workspace, and nothing else.

Operations: ``read``, ``write``, ``list``. Every path is opened beneath the workspace the kernel
names in each call's CallContext, never following a symlink: ``..``, an absolute path, or a symlink
anywhere on the path is permission_denied, and a missing file is not_found.
"""

from __future__ import annotations

__all__: list[str] = []
