"""File checks: assertions over the trial's workspace files (grading.yaml ``path_glob`` checks).

Evaluated before the golden replay, which may write files of its own into the same workspace.

The workspace was written by the trial's code, so it is read as hostile: every folder and file is
opened beneath the workspace without following a symlink (:mod:`tolokaforge.core.beneath`), so a link
to ``/etc/passwd`` or a folder swapped for a link mid-grading is never read; a symlink is not a file
for any operator, ``exists`` included. Only regular files match (a FIFO would block the read). At most
:data:`MAX_FILE_BYTES` of a file are read: a larger one holds no value (it fails contains and equals,
and the reason names it), so a huge or sparse file costs bounded memory and never passes on a prefix.
The walk visits at most :data:`MAX_ENTRIES` folder entries per check.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from tolokaforge.core.beneath import open_beneath, read_beneath
from tolokaforge.core.models import FileCheck

from .component import ComponentResult

__all__ = ["MAX_ENTRIES", "MAX_FILE_BYTES", "evaluate_file_checks"]

MAX_FILE_BYTES = 16 * 1024 * 1024
"""The most of one file a check reads; a larger file fails contains/equals, named in the reason."""

MAX_ENTRIES = 100_000
"""Folder entries one check's glob may visit; past it the check fails (a tree that large is refused)."""

_O_PATH: int = getattr(os, "O_PATH", 0)


class _Unmatchable(Exception):
    """The pattern cannot name files beneath the workspace, or the walk outgrew its bound."""


@dataclass
class _Walk:
    root: int
    visited: int = 0
    unreadable: list[str] = field(default_factory=lambda: [])


def evaluate_file_checks(checks: Sequence[FileCheck], workspace: Path | None) -> ComponentResult:
    """Score = the fraction of checks that hold; the segment names every failing one.

    Blocking file I/O: async callers run it on a thread.
    """
    failures: list[str] = []
    root = _open_workspace(workspace)
    try:
        for check in checks:
            why = _failure(check, root)
            if why is not None:
                failures.append(f"{check.description or check.path_glob}: {why}")
    finally:
        if root is not None:
            os.close(root)
    passed = len(checks) - len(failures)
    score = passed / len(checks) if checks else 1.0
    if failures:
        segment = f"Files: {passed}/{len(checks)} checks passed; " + "; ".join(failures)
    else:
        segment = f"Files: all {len(checks)} checks passed"
    return ComponentResult("files", score, segment, extra={"file_checks": (passed, len(checks))})


def _open_workspace(workspace: Path | None) -> int | None:
    if workspace is None:
        return None
    try:
        return os.open(workspace, (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None  # no workspace: nothing matches


def _failure(check: FileCheck, root: int | None) -> str | None:
    walk = _Walk(root) if root is not None else None
    try:
        matches = sorted(set(_matching(check.path_glob, walk))) if walk is not None else []
    except _Unmatchable as error:
        return str(error)
    if check.operator == "exists":
        if bool(matches) == check.exists:
            return None
        return f"expected {'a' if check.exists else 'no'} file matching {check.path_glob!r}"
    if not matches:
        return f"no file matches {check.path_glob!r}"
    assert walk is not None
    texts = (_text(walk, path) for path in matches)
    if check.operator == "contains" and check.contains is not None:
        needle = check.contains
        ok = any(text is not None and needle in text for text in texts)
    elif check.operator == "contains_ci" and check.contains_ci is not None:
        needle = check.contains_ci.casefold()
        ok = any(text is not None and needle in text.casefold() for text in texts)
    else:
        ok = any(text is not None and text == check.equals for text in texts)
    if ok:
        return None
    why = f"{check.operator} {getattr(check, check.operator)!r} holds in none of {len(matches)} file(s)"
    if walk.unreadable:
        why += f" ({'; '.join(walk.unreadable)})"
    return why


def _text(walk: _Walk, path: str) -> str | None:
    """The file's text, or None (with the reason kept) when it cannot be read whole."""
    try:
        data, truncated = read_beneath(walk.root, path, MAX_FILE_BYTES)
    except OSError as error:  # swapped for a link, or removed, since the walk saw it
        walk.unreadable.append(f"{path!r} could not be read: {error.strerror or error}")
        return None
    if truncated:
        walk.unreadable.append(f"{path!r} is larger than the {MAX_FILE_BYTES}-byte limit of file checks")
        return None
    return data.decode("utf-8", errors="replace")


def _matching(pattern: str, walk: _Walk) -> Iterator[str]:
    """Regular files beneath the workspace whose relative path matches ``pattern`` (``**``: any depth)."""
    if pattern.startswith("/"):
        raise _Unmatchable(f"{pattern!r} is absolute; file checks name files relative to the workspace")
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise _Unmatchable(f"{pattern!r} leaves the workspace with '..'")
    if not parts:
        return iter(())
    return _match(walk, "", parts)


def _match(walk: _Walk, folder: str, parts: list[str]) -> Iterator[str]:
    head, rest = parts[0], parts[1:]
    entries = _entries(walk, folder)
    if head == "**":
        if rest:
            yield from _match(walk, folder, rest)
        for name, is_dir, _ in entries:
            if is_dir:
                yield from _match(walk, _join(folder, name), parts)
        return
    for name, is_dir, is_file in entries:
        if not fnmatchcase(name, head):
            continue
        if rest and is_dir:
            yield from _match(walk, _join(folder, name), rest)
        elif not rest and is_file:
            yield _join(folder, name)


def _entries(walk: _Walk, folder: str) -> list[tuple[str, bool, bool]]:
    """(name, is a real folder, is a regular file) of ``folder``'s entries; links are neither."""
    try:
        fd = open_beneath(walk.root, folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []  # gone, or swapped for a link, since its parent was listed
    try:
        with os.scandir(fd) as listing:
            found: list[tuple[str, bool, bool]] = []
            for entry in listing:
                walk.visited += 1
                if walk.visited > MAX_ENTRIES:
                    raise _Unmatchable(f"the workspace holds more than {MAX_ENTRIES} entries to match")
                found.append(
                    (entry.name, entry.is_dir(follow_symlinks=False), entry.is_file(follow_symlinks=False))
                )
            return found
    finally:
        os.close(fd)


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name
