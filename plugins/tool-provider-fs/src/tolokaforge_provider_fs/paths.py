"""The workspace a call may touch, what a written path names in it, and how a refused path is worded.

Every path is opened by :mod:`tolokaforge.core.beneath` relative to a descriptor of the workspace, so
no symlink is ever followed and nothing leaves the workspace, even while the trial's code swaps a
folder for a link. The workspace itself comes from the call's CallContext; this module decides
whether that is a workspace at all, and turns the absolute names the public tools give it
(``/env/fs/agent-visible/...``) into paths relative to it.
"""

from __future__ import annotations

import errno
import os

from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.beneath import NotARegularFile, PathEscapes, PathHasSymlink

__all__ = [
    "AGENT_VISIBLE_ROOTS",
    "Refusal",
    "WorkspacePin",
    "classify",
    "components",
    "in_workspace",
    "open_workspace",
    "parent_and_name",
]

_O_PATH: int = getattr(os, "O_PATH", 0)

AGENT_VISIBLE_ROOTS = ("/env/fs/agent-visible", "/work")
"""Absolute names of the workspace the model may use: public packs' prompts say ``/env/fs/agent-visible``,
and their file tools also take ``/work`` (the public code's own tests use both)."""


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


def in_workspace(written: str) -> str:
    """``written`` as a path relative to the workspace: an absolute path under one of
    :data:`AGENT_VISIBLE_ROOTS` loses that root; any other absolute path stays absolute, for
    :mod:`tolokaforge.core.beneath` to refuse. Surrounding blanks are dropped, as the public tools do.
    """
    path = written.strip()
    for root in AGENT_VISIBLE_ROOTS:
        if path == root:
            return "."
        if path.startswith(root + "/"):
            return path[len(root) + 1 :] or "."
    return path


def components(relative: str) -> list[str]:
    """The names along ``relative`` (``.`` and empty ones dropped); an escape is refused here, as
    :mod:`tolokaforge.core.beneath` would refuse it."""
    if "\0" in relative:
        raise ValueError("embedded null byte")
    if relative.startswith("/"):
        raise PathEscapes(errno.EXDEV, "is an absolute path", relative)
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathEscapes(errno.EXDEV, "goes up with '..'", relative)
    return parts


def parent_and_name(relative: str) -> tuple[str, str]:
    """The folder holding ``relative`` and its last name; the workspace itself has neither."""
    parts = components(relative)
    if not parts:
        raise Refusal(ToolErrorCategory.INVALID_ARGUMENTS, f"{relative!r} names the workspace itself")
    return "/".join(parts[:-1]) or ".", parts[-1]


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
    if isinstance(error, UnicodeDecodeError):
        return Refusal(
            ToolErrorCategory.EXECUTION_FAILED,
            f"{path!r} is not UTF-8 text (a binary file?); these tools read text only",
        )
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
