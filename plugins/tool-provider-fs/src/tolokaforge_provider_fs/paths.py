"""The workspace a call may touch, and how a refused path is worded.

Every path is opened by :mod:`tolokaforge.core.beneath` relative to a descriptor of the workspace, so
no symlink is ever followed and nothing leaves the workspace, even while the trial's code swaps a
folder for a link. The workspace itself comes from the call's CallContext; this module decides
whether that is a workspace at all.
"""

from __future__ import annotations

import os

from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.beneath import NotARegularFile, PathEscapes, PathHasSymlink

__all__ = ["Refusal", "WorkspacePin", "classify", "open_workspace"]

_O_PATH: int = getattr(os, "O_PATH", 0)


class Refusal(Exception):
    """A failure already classified into the ToolError taxonomy."""

    def __init__(self, category: ToolErrorCategory, message: str) -> None:
        super().__init__(message)
        self.category = category
        self.message = message


class WorkspacePin:
    """The one workspace this process serves: the first call's.

    The runner starts one provider process per trial, so every call names the same workspace; a
    call naming another one is refused rather than trusted.
    """

    def __init__(self) -> None:
        self.path: str | None = None

    def claim(self, working_directory: str) -> str:
        """``working_directory`` if this process may serve it, else a :class:`Refusal`."""
        denied = ToolErrorCategory.PERMISSION_DENIED
        if not working_directory:
            raise Refusal(denied, "the call names no workspace")
        if not os.path.isabs(working_directory):
            raise Refusal(denied, f"the workspace {working_directory!r} is not an absolute path")
        if self.path is None:
            self.path = working_directory
        elif working_directory != self.path:
            raise Refusal(
                denied,
                f"this provider serves the workspace {self.path!r}; the call names {working_directory!r}",
            )
        return working_directory


def open_workspace(path: str) -> int:
    """A descriptor of the workspace folder ``path`` (the caller closes it); never ``/``."""
    denied = ToolErrorCategory.PERMISSION_DENIED
    try:
        # The path up to the workspace is the runner's, so it may hold symlinks; below it, none.
        fd = os.open(path, (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise Refusal(denied, f"the workspace {path!r} is not a folder: {error.strerror}") from error
    if os.path.samestat(os.fstat(fd), os.stat("/")):
        os.close(fd)
        raise Refusal(denied, "the file system's root is not a workspace")
    return fd


def classify(path: str, error: OSError | ValueError) -> Refusal:
    """The taxonomy's reading of what opening, reading or writing ``path`` raised."""
    denied = ToolErrorCategory.PERMISSION_DENIED
    if isinstance(error, ValueError):
        return Refusal(ToolErrorCategory.INVALID_ARGUMENTS, f"{path!r} is not a usable path: {error}")
    if isinstance(error, PathEscapes):
        return Refusal(denied, f"{path!r} is outside the workspace ({error.strerror})")
    if isinstance(error, PathHasSymlink):
        return Refusal(denied, f"{path!r} is or passes through a symlink; links are never followed")
    if isinstance(error, NotARegularFile):
        return Refusal(denied, f"{path!r} is not a regular file")
    if isinstance(error, FileNotFoundError):
        return Refusal(ToolErrorCategory.NOT_FOUND, f"{path!r} does not exist")
    if isinstance(error, PermissionError):
        return Refusal(denied, f"{path!r}: permission denied")
    return Refusal(ToolErrorCategory.EXECUTION_FAILED, f"{path!r}: {error.strerror or error}")
