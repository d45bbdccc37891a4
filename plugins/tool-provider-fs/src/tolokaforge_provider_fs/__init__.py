"""A ToolProviderService plugin giving the model a filesystem: its trial's workspace, and nothing else.

Operations: ``read``, ``write``, ``list``. Every path is taken relative to the workspace the kernel
names in each call's CallContext; a path that leaves it -- ``../``, an absolute path, a symlink whose
target is outside -- is permission_denied, and a missing one is not_found.
"""

from __future__ import annotations

__all__: list[str] = []
