"""``grep_workspace``: lines matching a regular expression, and files matching a name glob.

The walk opens one folder at a time from its parent's descriptor with ``O_NOFOLLOW``: links are
skipped (never followed, so a search never leaves the workspace), as are FIFOs, sockets and devices.
Folders and files are visited in name order, so the same workspace always answers the same way.
Results stop at :data:`MAX_MATCHES`, as the public tool's do; each file is searched in its first
:data:`MAX_SEARCHED_BYTES` only.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from typing import Any

from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.beneath import open_beneath

from .paths import Refusal, classify, components, in_workspace
from .schema import Outcome

__all__ = ["MAX_MATCHES", "MAX_SEARCHED_BYTES", "grep_workspace"]

MAX_MATCHES = 200
MAX_SEARCHED_BYTES = 1024 * 1024
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def grep_workspace(root: int, arguments: dict[str, Any]) -> Outcome:
    # An empty pattern or glob counts as not given, as in the public tool.
    pattern: str = arguments.get("pattern") or ""
    glob: str = arguments.get("file_glob") or ""
    if not pattern and not glob:
        raise Refusal(ToolErrorCategory.INVALID_ARGUMENTS, "give at least one of 'pattern' or 'file_glob'")
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as error:
        raise Refusal(
            ToolErrorCategory.INVALID_ARGUMENTS, f"'pattern' is not a valid regular expression: {error}"
        ) from error
    written = str(arguments.get("path") or ".")
    try:
        relative = in_workspace(written)
        prefix = "/".join(components(relative))
        top = open_beneath(root, relative, _FOLDER_FLAGS)
    except (OSError, ValueError) as error:
        raise classify(written, error) from error
    matches: list[str] = []
    try:
        for path, fd in _files(top, prefix):
            if glob and not fnmatch.fnmatchcase(path.rpartition("/")[2], glob):
                continue
            if regex is None:
                matches.append(path)
            else:
                matches.extend(_matching_lines(fd, path, regex, MAX_MATCHES - len(matches)))
            if len(matches) >= MAX_MATCHES:
                break
    finally:
        os.close(top)
    truncated = len(matches) >= MAX_MATCHES
    text = "\n".join(matches) or "(no matches)"
    if truncated:
        text += f"\n... (truncated at {MAX_MATCHES} matches)"
    return Outcome({"matches": matches, "truncated": truncated}, text)


def _files(folder: int, prefix: str) -> Iterator[tuple[str, int]]:
    """(path from the workspace, a descriptor valid until the next item) of each regular file."""
    with os.scandir(folder) as found:
        entries = sorted(found, key=lambda e: e.name)
    for entry in entries:
        path = f"{prefix}/{entry.name}" if prefix else entry.name
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            try:
                inner = os.open(entry.name, _FOLDER_FLAGS, dir_fd=folder)
            except OSError:
                continue  # swapped or removed since it was listed
            try:
                yield from _files(inner, path)
            finally:
                os.close(inner)
        elif entry.is_file(follow_symlinks=False):
            try:
                fd = os.open(entry.name, _FILE_FLAGS, dir_fd=folder)
            except OSError:
                continue
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    yield path, fd
            finally:
                os.close(fd)


def _matching_lines(fd: int, path: str, regex: re.Pattern[str], room: int) -> list[str]:
    chunks: list[bytes] = []
    left = MAX_SEARCHED_BYTES
    while left > 0 and (chunk := os.read(fd, min(left, 1024 * 1024))):
        chunks.append(chunk)
        left -= len(chunk)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if regex.search(line):
            found.append(f"{path}:{number}:{line.rstrip()}")
            if len(found) >= room:
                break
    return found
