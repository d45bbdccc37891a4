"""Confine a caller's path to the workspace: resolve it (symlinks included) and refuse what leaves."""

from __future__ import annotations

from pathlib import Path

__all__ = ["Escape", "confine"]


class Escape(Exception):
    """The path resolves outside the workspace."""


def confine(workspace: str, path: str) -> Path:
    """``path`` (relative to ``workspace``) resolved; raises :class:`Escape` when it leaves the workspace."""
    if not workspace:
        raise Escape("the call names no workspace")
    root = Path(workspace).resolve(strict=True)
    # resolve() follows every symlink that exists, so a link pointing out is caught like "../".
    target = (root / path).resolve(strict=False)
    if target != root and not target.is_relative_to(root):
        raise Escape(f"{path!r} is outside the workspace")
    return target
